//! What to tell an operator about a key the configuration does not know: the setting it most
//! likely meant (a typo: `listn` → `listen`), or where the key belongs (a top-level setting
//! written under a table: `policy_default` under `[auth]`), and why a file cannot hold
//! `[server]` beside `[[server]]`.
//!
//! Invariant: a hint only ever names settings of [`SETTINGS`] and quotes the operator's own
//! key, never a value (a value may be a secret).

use super::settings::SETTINGS;

/// The hint for `path`, an unknown key (`section.key`, dotted): " (did you mean …?)" or an
/// explanation of where it belongs; empty when nothing is close. `is_table` says the key
/// holds a table, so only a section can be meant.
pub(super) fn unknown_key_hint(path: &str, is_table: bool) -> String {
    let leaf = path.rsplit('.').next().unwrap_or(path);
    if !is_table && leaf != path {
        // The right name in the wrong place: a top-level setting under a table, or a
        // setting of another section.
        if let Some(setting) = SETTINGS.iter().find(|s| s.key == leaf) {
            return format!(
                "; `{}` is a top-level setting: write it before the first [table] header of the file",
                setting.key
            );
        }
        let elsewhere: Vec<&str> =
            SETTINGS.iter().filter(|s| s.key.rsplit('.').next() == Some(leaf)).map(|s| s.key).collect();
        if let [only] = elsewhere.as_slice() {
            return format!("; did you mean `{only}`? (it belongs in [{}])", section_of(only));
        }
    }
    let candidates: Vec<String> =
        if is_table { sections() } else { SETTINGS.iter().map(|s| s.key.to_owned()).collect() };
    match nearest(path, &candidates) {
        Some(best) if is_table => format!("; did you mean [{best}]?"),
        Some(best) => format!("; did you mean `{best}`?"),
        None => String::new(),
    }
}

/// The explanation for a file that failed to parse while holding both a `[server]` table
/// and `[[server]]` tables (TOML cannot: one name, two kinds); `None` when it does not.
pub(super) fn server_table_clash(text: &str) -> Option<&'static str> {
    let (mut settings, mut virtual_servers) = (false, false);
    for line in text.lines() {
        let header = line.split('#').next().unwrap_or("").replace([' ', '\t'], "");
        settings |= header == "[server]";
        virtual_servers |= header == "[[server]]";
    }
    (settings && virtual_servers).then_some(
        "the file has both a [server] table (settings) and [[server]] tables (virtual servers), which TOML \
         cannot hold under one name: rename [server] to [gateway] (another name of the same settings)",
    )
}

/// Every section (table) name settings live under, e.g. `auth` and `auth.jwt`.
fn sections() -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for setting in SETTINGS {
        let mut parts: Vec<&str> = setting.key.split('.').collect();
        parts.pop();
        for end in 1..=parts.len() {
            let section = parts[..end].join(".");
            if !out.contains(&section) {
                out.push(section);
            }
        }
    }
    out
}

fn section_of(key: &str) -> &str {
    key.rsplit_once('.').map_or("", |(section, _)| section)
}

/// The candidate closest to `key` by edit distance, if close enough to be a typo: at most
/// one edit in four characters (at least one, at most three), and a single best.
fn nearest(key: &str, candidates: &[String]) -> Option<String> {
    let allowed = (key.chars().count() / 4).clamp(1, 3);
    let mut scored: Vec<(usize, &String)> =
        candidates.iter().map(|c| (distance(key, c), c)).filter(|(d, _)| *d <= allowed).collect();
    scored.sort();
    match scored.as_slice() {
        [(d, best), rest @ ..] if rest.first().is_none_or(|(next, _)| next > d) => Some((*best).clone()),
        _ => None,
    }
}

/// Levenshtein distance over characters, counting a swap of two neighbours as one edit
/// (`lsiten` → `listen`).
fn distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut rows = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in rows.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in rows[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (rows[i - 1][j] + 1).min(rows[i][j - 1] + 1).min(rows[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(rows[i - 2][j - 2] + 1);
            }
            rows[i][j] = best;
        }
    }
    rows[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::{distance, server_table_clash, unknown_key_hint};

    #[test]
    fn typos_name_the_nearest_setting() {
        assert_eq!(distance("listn", "listen"), 1);
        assert_eq!(distance("lsiten", "listen"), 1);
        assert_eq!(unknown_key_hint("listn", false), "; did you mean `listen`?");
        assert_eq!(unknown_key_hint("http.body_limit_byte", false), "; did you mean `http.body_limit_bytes`?");
        assert_eq!(unknown_key_hint("htp", true), "; did you mean [http]?");
        assert_eq!(unknown_key_hint("completely_unrelated_words", false), "");
    }

    #[test]
    fn a_key_in_the_wrong_table_is_told_where_it_belongs() {
        let hint = unknown_key_hint("auth.policy_default", false);
        assert!(hint.contains("`policy_default` is a top-level setting"), "{hint}");
        let hint = unknown_key_hint("http.issuer", false);
        assert!(hint.contains("`auth.jwt.issuer`") && hint.contains("[auth.jwt]"), "{hint}");
    }

    #[test]
    fn server_and_virtual_servers_together_are_explained() {
        assert!(server_table_clash("[server]\npublic_url = \"x\"\n[[server]]\nname = \"a\"\n").is_some());
        assert!(server_table_clash("[ server ] # settings\n[[ server ]]\n").is_some());
        assert!(server_table_clash("[gateway]\n[[server]]\n").is_none());
        assert!(server_table_clash("[server]\n").is_none());
    }
}
