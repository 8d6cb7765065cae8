//! Name globs for `tools.include` / `tools.exclude` (and the gateway's virtual servers'
//! selections): `*` matches any run of characters, `?` exactly one; everything else is literal.

/// A parsed glob.
#[derive(Debug, Clone, Copy)]
pub struct Glob<'a>(&'a str);

impl<'a> Glob<'a> {
    /// The glob `pattern`.
    pub fn new(pattern: &'a str) -> Self {
        Self(pattern)
    }

    /// Whether `name` matches (iterative, with backtracking to the last `*`: linear in practice,
    /// never exponential; no allocation, as lists and reads match many names per request).
    pub fn matches(self, name: &str) -> bool {
        let (p, s) = (self.0, name);
        // Byte offsets into the pattern and the name, always on char boundaries.
        let (mut pi, mut si) = (0, 0);
        // After the last `*` seen: where its pattern continues, and the name offset it has
        // swallowed up to.
        let mut star: Option<(usize, usize)> = None;
        while let Some(sc) = s[si..].chars().next() {
            match p[pi..].chars().next() {
                Some('*') => {
                    pi += 1;
                    star = Some((pi, si));
                }
                Some(pc) if pc == '?' || pc == sc => {
                    pi += pc.len_utf8();
                    si += sc.len_utf8();
                }
                _ => match star {
                    Some((after, swallowed)) => {
                        let next = swallowed + s[swallowed..].chars().next().map_or(1, char::len_utf8);
                        pi = after;
                        si = next;
                        star = Some((after, next));
                    }
                    None => return false,
                },
            }
        }
        p[pi..].chars().all(|c| c == '*')
    }
}

#[cfg(test)]
mod tests {
    use super::Glob;

    #[test]
    fn globs() {
        for (p, s, want) in [
            ("web_*", "web_fetch", true),
            ("web_*", "web_", true),
            ("web_*", "we", false),
            ("*", "", true),
            ("a?c", "abc", true),
            ("a?c", "ac", false),
            ("*x*y", "axbxy", true),
            ("exact", "exact", true),
            ("exact", "exact2", false),
            ("é*ü", "éaü", true),
            ("?", "ü", true),
            ("a*b*c", "aXbYbZc", true),
            ("a*b*c", "aXbYbZ", false),
            ("*.*", "no-dot", false),
        ] {
            assert_eq!(Glob::new(p).matches(s), want, "{p} vs {s}");
        }
    }
}
