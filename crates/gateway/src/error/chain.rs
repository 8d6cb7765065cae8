//! Walking an error's `source` chain: finding a cause of a given type (as linkerd2-proxy's
//! `cause_ref` / `is_caused_by` do) and printing the whole chain as one text.
//!
//! Invariant: the chain starts at the error itself, so a cause is found whether it is the
//! error or any error behind it; the walk ends at the first error without a source.

use std::error::Error;
use std::fmt;

/// The cause of an error, kept for the log and for `{:#}` chains.
pub type BoxError = Box<dyn Error + Send + Sync + 'static>;

/// The first error of type `E` in `error`'s chain (the error itself included), if any.
pub fn cause_ref<'e, E: Error + 'static>(error: &'e (dyn Error + 'static)) -> Option<&'e E> {
    let mut next = Some(error);
    while let Some(error) = next {
        if let Some(found) = error.downcast_ref::<E>() {
            return Some(found);
        }
        next = error.source();
    }
    None
}

/// Whether an error of type `E` is in `error`'s chain (the error itself included).
pub fn is_caused_by<E: Error + 'static>(error: &(dyn Error + 'static)) -> bool {
    cause_ref::<E>(error).is_some()
}

/// An error and its sources as one text, `outer: cause: root cause` (each wrapping error
/// says what failed at its own level, so the parts do not repeat one another).
#[derive(Clone, Copy)]
pub struct Chain<'e>(pub &'e (dyn Error + 'static));

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut next = self.0.source();
        while let Some(cause) = next {
            write!(f, ": {cause}")?;
            next = cause.source();
        }
        Ok(())
    }
}

impl fmt::Debug for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("reading the task")]
    struct Outer(#[source] Middle);

    #[derive(Debug, thiserror::Error)]
    #[error("the store did not answer")]
    struct Middle(#[source] std::io::Error);

    fn outer() -> Outer {
        Outer(Middle(std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused")))
    }

    #[test]
    fn a_cause_is_found_at_any_depth_and_the_error_itself_counts() {
        let error = outer();
        assert!(cause_ref::<std::io::Error>(&error).is_some_and(|e| e.kind() == std::io::ErrorKind::ConnectionRefused));
        assert!(is_caused_by::<Middle>(&error));
        assert!(is_caused_by::<Outer>(&error));
        assert!(!is_caused_by::<std::fmt::Error>(&error));
    }

    #[test]
    fn the_chain_prints_every_level_once() {
        let error = outer();
        assert_eq!(Chain(&error).to_string(), "reading the task: the store did not answer: connection refused");
    }
}
