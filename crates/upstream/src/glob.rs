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
    /// never exponential).
    pub fn matches(self, name: &str) -> bool {
        let p: Vec<char> = self.0.chars().collect();
        let s: Vec<char> = name.chars().collect();
        let (mut pi, mut si) = (0, 0);
        let mut star: Option<(usize, usize)> = None;
        while si < s.len() {
            if pi < p.len() && (p[pi] == '?' || p[pi] == s[si]) {
                pi += 1;
                si += 1;
            } else if pi < p.len() && p[pi] == '*' {
                star = Some((pi, si));
                pi += 1;
            } else if let Some((sp, ss)) = star {
                pi = sp + 1;
                si = ss + 1;
                star = Some((sp, ss + 1));
            } else {
                return false;
            }
        }
        p[pi..].iter().all(|&c| c == '*')
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
        ] {
            assert_eq!(Glob::new(p).matches(s), want, "{p} vs {s}");
        }
    }
}
