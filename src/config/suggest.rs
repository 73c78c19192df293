//! The typo suggestion: the allowed word nearest to a misspelt one, or
//! the one allowed word it is a part of.

/// The candidate nearest to `word` when it is close enough to be a typo;
/// else the one candidate that has every part of `word` among its own
/// (`timeout` in `item_timeout`, `Tokyo` in `Asia/Tokyo`).
pub(super) fn closest<'c>(
    word: &str,
    candidates: impl Iterator<Item = &'c str> + Clone,
) -> Option<&'c str> {
    let limit = (word.chars().count() / 3).clamp(1, 3);
    candidates
        .clone()
        .map(|c| (edit_distance(&word.to_lowercase(), &c.to_lowercase()), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
        .or_else(|| whole_part_of(word, candidates))
}

/// The one candidate whose parts (split at `_`, `/`, `-` and spaces, any case)
/// include every part of `word`; none when no or several do.
fn whole_part_of<'c>(word: &str, candidates: impl Iterator<Item = &'c str>) -> Option<&'c str> {
    let parts = |s: &str| -> Vec<String> {
        s.split(['_', '/', '-', ' '])
            .filter(|p| !p.is_empty())
            .map(str::to_lowercase)
            .collect()
    };
    let wanted = parts(word);
    if wanted.is_empty() {
        return None;
    }
    let mut found = candidates.filter(|c| {
        let have = parts(c);
        wanted.iter().all(|w| have.contains(w))
    });
    match (found.next(), found.next()) {
        (Some(one), None) => Some(one),
        _ => None,
    }
}

/// Levenshtein distance over chars.
pub(super) fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut row = Vec::with_capacity(b.len() + 1);
        row.push(i + 1);
        for (j, cb) in b.iter().enumerate() {
            let substitute = prev[j] + usize::from(ca != *cb);
            row.push(substitute.min(prev[j + 1] + 1).min(row[j] + 1));
        }
        prev = row;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::closest;

    #[test]
    fn a_word_that_is_a_part_of_one_candidate_names_it() {
        let fields = [
            "item_timeout",
            "max_duration",
            "max_attempts",
            "lock_ttl",
            "token_estimate",
            "estimate_field",
        ];
        assert_eq!(
            closest("timeout", fields.iter().copied()),
            Some("item_timeout")
        );
        assert_eq!(
            closest("attempts", fields.iter().copied()),
            Some("max_attempts")
        );
        // A part of several: no guess.
        assert_eq!(closest("estimate", fields.iter().copied()), None);
        assert_eq!(
            closest("tokyo", ["Asia/Tokyo", "Asia/Seoul"].into_iter()),
            Some("Asia/Tokyo")
        );
        assert_eq!(
            closest("New_York", ["America/New_York", "America/York"].into_iter()),
            Some("America/New_York")
        );
        assert_eq!(
            closest("new york", ["America/New_York", "America/York"].into_iter()),
            Some("America/New_York")
        );
        assert_eq!(closest("__", ["a_b"].into_iter()), None);
    }
}
