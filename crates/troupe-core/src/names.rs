//! Did-you-mean for names a person types (engine ids, role names): the one
//! rule every "unknown …" error uses to suggest the name meant.

/// The name of `known` closest to `wanted`, when one is close enough to be
/// the one meant: a few characters apart (a third of its length, at least
/// one), or one a prefix of the other.
pub fn closest<'a>(wanted: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    known
        .into_iter()
        .map(|k| (distance(wanted, k), k))
        .filter(|(d, k)| *d <= (k.len() / 3).max(1) || k.starts_with(wanted) || wanted.starts_with(*k))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// Levenshtein distance.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_and_prefixes_are_close_other_names_are_not() {
        let known = ["builder", "inspector", "mentor"];
        assert_eq!(closest("buidler", known), Some("builder"));
        assert_eq!(closest("inspect", known), Some("inspector"));
        assert_eq!(closest("mentr", known), Some("mentor"));
        assert_eq!(closest("wizard", known), None);
    }
}
