//! Text fitted to terminal cells: measured by display width (a CJK
//! character or an emoji takes two cells, a combining mark none), cut at a
//! grapheme boundary with `…`, padded, and wrapped by width with nothing
//! left out. Every fit of text to cells, in the dashboard and in the CLI
//! (its tables, `status --short`, the live progress line, a hook's stderr
//! line), and every bound on a kept message, goes through here: nothing
//! else cuts text. A grapheme is measured as ratatui draws it, so a cut
//! made here is exactly what fits on screen.
//!
//! Callers make text inert first (`sanitize`): a control character has no
//! width here, as ratatui does not draw it.

use std::borrow::Cow;
use std::ops::Range;

use unicode_segmentation::UnicodeSegmentation;
use unicode_width::UnicodeWidthStr;

/// Marks every cut.
pub const ELLIPSIS: &str = "…";

/// Cells one grapheme takes, as ratatui draws it: halfwidth (han)dakuten
/// (U+FF9E, U+FF9F) take a cell of their own in terminals although
/// Unicode gives them none.
fn cells(g: &str) -> usize {
    if g.chars().any(char::is_control) {
        return 0;
    }
    if g.len() == 1 {
        return 1;
    }
    g.width()
        + g.chars()
            .filter(|c| matches!(c, '\u{FF9E}' | '\u{FF9F}'))
            .count()
}

/// `s` as ratatui can draw it: a halfwidth (han)dakuten takes a cell of
/// its own in a terminal, but none by the width ratatui measures a cell's
/// text with, so a line holding one was drawn a cell short of where the
/// terminal put it (the rest shifted, marks left behind on screen). It is
/// composed with the halfwidth kana before it into the fullwidth kana
/// (`ｶﾞ` into `ガ`: two cells either way), or, after anything else,
/// written as its fullwidth spacing form (`゛`), which both measure alike.
/// The dashboard draws its text through this; the CLI prints as written.
pub fn drawable(s: &str) -> Cow<'_, str> {
    if !s.contains(['\u{FF9E}', '\u{FF9F}']) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        let composed = match chars.peek() {
            Some('\u{FF9E}') => voiced(c),
            Some('\u{FF9F}') => semi_voiced(c),
            _ => None,
        };
        match (composed, c) {
            (Some(k), _) => {
                out.push(k);
                chars.next();
            }
            (None, '\u{FF9E}') => out.push('\u{309B}'),
            (None, '\u{FF9F}') => out.push('\u{309C}'),
            (None, c) => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// What [`drawable`] replaces, in the order it does: every halfwidth
/// kana with its sound mark (`ｶﾞ` → `ガ`), then a sound mark alone. A
/// search that matches text as drawn (the dashboard's items search, in
/// the store's SQL) is built from this list, so the two never part.
/// Made once: a search asks for it per column.
pub fn drawn_kana() -> &'static [(String, char)] {
    static PAIRS: std::sync::LazyLock<Vec<(String, char)>> = std::sync::LazyLock::new(|| {
        let mut pairs: Vec<(String, char)> = ('\u{FF61}'..='\u{FF9D}')
            .flat_map(|c| {
                [
                    voiced(c).map(|k| (format!("{c}\u{FF9E}"), k)),
                    semi_voiced(c).map(|k| (format!("{c}\u{FF9F}"), k)),
                ]
            })
            .flatten()
            .collect();
        pairs.push(("\u{FF9E}".into(), '\u{309B}'));
        pairs.push(("\u{FF9F}".into(), '\u{309C}'));
        pairs
    });
    &PAIRS
}

/// The fullwidth kana a halfwidth one becomes with a dakuten.
fn voiced(c: char) -> Option<char> {
    Some(match c {
        'ｳ' => 'ヴ',
        'ｶ' => 'ガ',
        'ｷ' => 'ギ',
        'ｸ' => 'グ',
        'ｹ' => 'ゲ',
        'ｺ' => 'ゴ',
        'ｻ' => 'ザ',
        'ｼ' => 'ジ',
        'ｽ' => 'ズ',
        'ｾ' => 'ゼ',
        'ｿ' => 'ゾ',
        'ﾀ' => 'ダ',
        'ﾁ' => 'ヂ',
        'ﾂ' => 'ヅ',
        'ﾃ' => 'デ',
        'ﾄ' => 'ド',
        'ﾊ' => 'バ',
        'ﾋ' => 'ビ',
        'ﾌ' => 'ブ',
        'ﾍ' => 'ベ',
        'ﾎ' => 'ボ',
        'ﾜ' => 'ヷ',
        'ｦ' => 'ヺ',
        _ => return None,
    })
}

/// The fullwidth kana a halfwidth one becomes with a handakuten.
fn semi_voiced(c: char) -> Option<char> {
    Some(match c {
        'ﾊ' => 'パ',
        'ﾋ' => 'ピ',
        'ﾌ' => 'プ',
        'ﾍ' => 'ペ',
        'ﾎ' => 'ポ',
        _ => return None,
    })
}

/// Printable ASCII only: each byte one grapheme of one cell.
fn plain(s: &str) -> bool {
    s.bytes().all(|b| (0x20..0x7f).contains(&b))
}

/// Display width: the cells `s` takes on one line.
pub fn width(s: &str) -> usize {
    if plain(s) {
        return s.len();
    }
    s.graphemes(true).map(cells).sum()
}

/// The longest start of `s` (whole graphemes) that takes at most `max`
/// cells.
pub fn head(s: &str, max: usize) -> &str {
    // Printable ASCII: a grapheme and a cell a byte (a listing of 100,000
    // keys spent a third of its time segmenting them).
    if plain(s) {
        return &s[..s.len().min(max)];
    }
    head_by(s, max, cells)
}

/// The longest start of `s` (whole graphemes) that `measure`s at most
/// `max` in all.
fn head_by(s: &str, max: usize, measure: impl Fn(&str) -> usize) -> &str {
    let mut used = 0;
    for (i, g) in s.grapheme_indices(true) {
        used += measure(g);
        if used > max {
            return &s[..i];
        }
    }
    s
}

/// `s` in at most `max` cells: whole graphemes, ending in `…` when
/// anything was left out. Every cut of text to a width is this one (a
/// text known to go on is cut as `{text}…`, so the mark is kept).
pub fn cut(s: &str, max: usize) -> Cow<'_, str> {
    if head(s, max).len() == s.len() {
        return Cow::Borrowed(s);
    }
    if max == 0 {
        return Cow::Borrowed("");
    }
    Cow::Owned(format!("{}{ELLIPSIS}", whole_escapes(s, head(s, max - 1))))
}

/// `kept`, a start of `s`, without an escape `sanitize` wrote (`\x9b`,
/// `\u{202e}`) that it would end inside: a cut reads `y…`, not `y\u{202…`.
fn whole_escapes<'a>(s: &str, kept: &'a str) -> &'a str {
    match escape_across(s, kept.len()) {
        Some(start) => &kept[..start],
        None => kept,
    }
}

/// The start of the escape in `s` that spans `at` (begins before it and
/// ends after it), if one does.
fn escape_across(s: &str, at: usize) -> Option<usize> {
    // The longest escape, `\u{10ffff}`, is 10 bytes.
    let from = (at.saturating_sub(9)..at).find(|&i| s.is_char_boundary(i))?;
    let start = from + s[from..at].rfind('\\')?;
    let end = start + escape_len(&s[start..])?;
    (end > at).then_some(start)
}

/// The length of the escape `rest` starts with: `\xHH` or `\u{H…}`.
fn escape_len(rest: &str) -> Option<usize> {
    let hex = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_hexdigit());
    if let Some(h) = rest.strip_prefix("\\x") {
        return h.get(..2).filter(|t| hex(t)).map(|_| 4);
    }
    let body = rest.strip_prefix("\\u{")?;
    let close = body.find('}').filter(|&c| c <= 6)?;
    hex(&body[..close]).then_some(3 + close + 1)
}

/// `s` in at most `max` characters, `…` included, cut as [`cut`] cuts
/// (whole graphemes): a bound on what is kept (a stored message), where
/// a width would keep half as much Japanese as English.
pub fn cut_chars(s: &str, max: usize) -> Cow<'_, str> {
    let chars = |g: &str| g.chars().count();
    if head_by(s, max, chars).len() == s.len() {
        return Cow::Borrowed(s);
    }
    if max == 0 {
        return Cow::Borrowed("");
    }
    Cow::Owned(format!(
        "{}{ELLIPSIS}",
        whole_escapes(s, head_by(s, max - 1, chars))
    ))
}

/// Takes back the last grapheme of `s`, as Backspace does on a line the
/// user types: an emoji ZWJ sequence or a letter with its combining mark
/// goes whole, as it is drawn, never leaving a part of it behind.
pub fn pop_grapheme(s: &mut String) {
    let start = s.grapheme_indices(true).next_back().map_or(0, |(i, _)| i);
    s.truncate(start);
}

/// `s` in at most `max` cells keeping its end: `…/nightshift/store.db`.
pub fn cut_start(s: &str, max: usize) -> Cow<'_, str> {
    if width(s) <= max {
        return Cow::Borrowed(s);
    }
    if max == 0 {
        return Cow::Borrowed("");
    }
    let mut used = 0;
    let mut start = s.len();
    for (i, g) in s.grapheme_indices(true).rev() {
        used += cells(g);
        if used > max - 1 {
            break;
        }
        start = i;
    }
    // Nor begin inside one: `…evil`, not `…02e}evil`.
    if let Some(escape) = escape_across(s, start) {
        start = escape + escape_len(&s[escape..]).unwrap_or(0);
    }
    Cow::Owned(format!("{ELLIPSIS}{}", &s[start..]))
}

/// `s` followed by spaces up to `cells` cells (never cut).
pub fn pad(s: &str, cells: usize) -> String {
    let w = width(s);
    let mut out = String::with_capacity(s.len() + cells.saturating_sub(w));
    out.push_str(s);
    out.extend(std::iter::repeat_n(' ', cells.saturating_sub(w)));
    out
}

/// Spaces, then `s`, up to `cells` cells (never cut).
pub fn pad_left(s: &str, cells: usize) -> String {
    let mut out = " ".repeat(cells.saturating_sub(width(s)));
    out.push_str(s);
    out
}

/// `s` in exactly `cells` cells: cut, then padded.
pub fn fit(s: &str, cells: usize) -> String {
    pad(&cut(s, cells), cells)
}

fn is_space(g: &str) -> bool {
    g.chars().all(char::is_whitespace)
}

/// May not begin a line (Japanese line breaking, kinsoku): closing
/// brackets, punctuation, small kana, the long-vowel mark, iteration marks.
fn no_start(g: &str) -> bool {
    g.chars().next().is_some_and(|c| {
        matches!(c,
            ')' | ']' | '}' | ',' | '.' | ':' | ';' | '?' | '!' | '%'
            | '、' | '。' | '，' | '．' | '・' | '：' | '；' | '？' | '！' | '％'
            | '）' | '］' | '｝' | '」' | '』' | '】' | '〕' | '〉' | '》' | '〙' | '〗' | '〟'
            | '’' | '”' | '｠' | '»' | '…' | '‥' | 'ー' | '～' | '〜'
            | 'ぁ' | 'ぃ' | 'ぅ' | 'ぇ' | 'ぉ' | 'っ' | 'ゃ' | 'ゅ' | 'ょ' | 'ゎ' | 'ゕ' | 'ゖ'
            | 'ァ' | 'ィ' | 'ゥ' | 'ェ' | 'ォ' | 'ッ' | 'ャ' | 'ュ' | 'ョ' | 'ヮ' | 'ヵ' | 'ヶ'
            | 'ㇰ'..='ㇿ' | '々' | '〻' | 'ゝ' | 'ゞ' | 'ヽ' | 'ヾ' | '゛' | '゜'
            | 'ｧ'..='ｯ' | 'ｰ' | '｡' | '､' | 'ﾞ' | 'ﾟ')
    })
}

/// May not end a line: opening brackets and quotes.
fn no_end(g: &str) -> bool {
    g.chars().next().is_some_and(|c| {
        matches!(
            c,
            '(' | '['
                | '{'
                | '（'
                | '［'
                | '｛'
                | '「'
                | '『'
                | '【'
                | '〔'
                | '〈'
                | '《'
                | '〘'
                | '〖'
                | '〝'
                | '‘'
                | '“'
                | '｟'
                | '«'
                | '｢'
        )
    })
}

/// Whether a line may break between `prev` and `next`: after spaces, and
/// around wide characters (CJK text has no spaces between words) unless
/// kinsoku forbids it.
fn may_break(prev: &str, next: &str) -> bool {
    if is_space(next) {
        return false;
    }
    if is_space(prev) {
        return true;
    }
    (cells(prev) > 1 || cells(next) > 1) && !no_start(next) && !no_end(prev)
}

/// `s` as lines of at most `max` cells (one line for an empty text). Lines
/// break after spaces and between CJK characters where Japanese allows it;
/// a word longer than a line is broken by width. Nothing is left out but
/// the spaces a line breaks at; a grapheme is never split (a combining
/// mark stays with its base, an emoji ZWJ sequence whole). A single
/// grapheme wider than `max` gets a line of its own.
pub fn wrap(s: &str, max: usize) -> Vec<String> {
    wrap_ranges(s, max, max)
        .into_iter()
        .map(|r| s[r].to_string())
        .collect()
}

/// Where [`wrap`] breaks `s`: each line's byte range, the first of at most
/// `first` cells, every later one of at most `rest` (a continuation set
/// under a label). The one line-breaking rule of every wrapped text, plain
/// or styled (the dashboard's `wrap_lines` keeps each part's style).
pub fn wrap_ranges(s: &str, first: usize, rest: usize) -> Vec<Range<usize>> {
    let room = |lines: &Vec<Range<usize>>| if lines.is_empty() { first } else { rest }.max(1);
    let mut lines: Vec<Range<usize>> = Vec::new();
    // The line being filled: where it starts (`None`: nothing in it yet)
    // and ends, and the cells it takes.
    let mut start: Option<usize> = None;
    let mut end = 0;
    let mut used = 0;
    // The last place in the line it may break: (byte offset, cells before).
    let mut brk: Option<(usize, usize)> = None;
    let mut prev: Option<&str> = None;
    for (at, g) in s.grapheme_indices(true) {
        let w = cells(g);
        if is_space(g) && (start.is_none() && !lines.is_empty() || used + w > room(&lines)) {
            // The break itself, or a space where the next line would
            // start: not carried over.
            if let Some(st) = start.take() {
                lines.push(st..end);
            }
            used = 0;
            brk = None;
            prev = Some(g);
            continue;
        }
        if prev.is_some_and(|p| may_break(p, g)) {
            brk = Some((at, used));
        }
        while let Some(st) = start
            && used + w > room(&lines)
        {
            match brk.take() {
                Some((b, before)) if b > st => {
                    lines.push(st..b);
                    start = Some(b);
                    used -= before;
                }
                _ => {
                    lines.push(st..end);
                    start = None;
                    used = 0;
                }
            }
        }
        start.get_or_insert(at);
        end = at + g.len();
        used += w;
        prev = Some(g);
    }
    match start {
        Some(st) => lines.push(st..end),
        None if lines.is_empty() => lines.push(0..0),
        None => {}
    }
    lines
}

/// `1,234,567`: a count grouped by thousands.
#[must_use]
pub fn grouped(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 { format!("-{out}") } else { out }
}

#[cfg(test)]
mod tests {
    use super::*;

    const JA: &str =
        "投稿に失敗しました：サーバーが応答しません。しばらくしてから再度お試しください。";

    #[test]
    fn a_cut_keeps_an_escape_whole_or_leaves_it_out() {
        let inert = crate::util::sanitize::line("x\u{9b}31m y\u{202e}evil");
        assert_eq!(inert, "x\\x9b31m y\\u{202e}evil");
        // Every width: each cut ends in … and holds no part of an escape.
        for max in 1..width(&inert) {
            for cut in [cut(&inert, max), cut_chars(&inert, max)] {
                let kept = cut.strip_suffix(ELLIPSIS).unwrap();
                assert!(inert.starts_with(kept), "{cut}");
                assert!(escape_across(&inert, kept.len()).is_none(), "{max}: {cut}");
            }
            let end = cut_start(&inert, max);
            let kept = end.strip_prefix(ELLIPSIS).unwrap();
            let at = inert.len() - kept.len();
            assert!(escape_across(&inert, at).is_none(), "{max}: {end}");
        }
        assert_eq!(cut(&inert, 14), "x\\x9b31m y…");
        assert_eq!(cut(&inert, 19), "x\\x9b31m y\\u{202e}…");
        assert_eq!(cut_start(&inert, 8), "…evil");
        // A backslash the text had, not an escape, is cut like any text.
        assert_eq!(cut(r"C:\u{zz} path", 6), r"C:\u{…");
    }

    #[test]
    fn widths_count_cells() {
        assert_eq!(width("abc"), 3);
        assert_eq!(width("ブログ:技術記事"), 15);
        assert_eq!(
            width("e\u{301}te\u{301}"),
            3,
            "combining marks take no cell"
        );
        assert_eq!(width("🎉"), 2);
        assert_eq!(width("ｶﾞ"), 2, "a halfwidth dakuten takes its own cell");
        assert_eq!(width(""), 0);
    }

    #[test]
    fn cuts_end_in_an_ellipsis_and_never_split_a_grapheme() {
        assert_eq!(cut("hello", 5), "hello");
        assert_eq!(cut("hello", 4), "hel…");
        assert_eq!(cut("hello", 1), "…");
        assert_eq!(cut("hello", 0), "");
        assert_eq!(head("ブログ", 5), "ブロ");
        assert_eq!(head("ブログ", 6), "ブログ");
        assert!(matches!(cut("hi", 5), Cow::Borrowed(_)));
        // Wide characters: a half cell left over stays empty.
        assert_eq!(cut("ブログ:技術記事", 8), "ブログ:…");
        assert_eq!(cut("ブログ:技術記事", 9), "ブログ:…");
        assert_eq!(
            width(&cut("ブログ:技術記事", 9)),
            8,
            "half a wide character stays empty"
        );
        assert_eq!(cut("ブログ:技術記事", 10), "ブログ:技…");
        // A combining mark stays with its base.
        assert_eq!(cut("cafe\u{301}s!", 5), "cafe\u{301}…");
        assert_eq!(cut("e\u{301}e\u{301}e\u{301}", 2), "e\u{301}…");
        assert_eq!(cut("🎉🎉🎉", 5), "🎉🎉…");
        assert_eq!(cut("👨‍👩‍👧 family", 3), "👨‍👩‍👧…");
    }

    /// Halfwidth sound marks take their own cell, and an emoji of several
    /// people (a ZWJ sequence) is one grapheme: a cut never leaves a bare
    /// joiner to glue the `…` onto the emoji.
    #[test]
    fn cuts_count_sound_marks_and_keep_zwj_sequences_whole() {
        let kana = "ｶﾞ".repeat(20);
        assert_eq!(cut(&kana, 32), format!("{}…", "ｶﾞ".repeat(15)));
        assert_eq!(width(&cut(&kana, 32)), 31);
        let family = format!("{}👨‍👩‍👧{}", "あ".repeat(14), "い".repeat(5));
        assert_eq!(cut(&family, 32), format!("{}👨‍👩‍👧…", "あ".repeat(14)));
        assert_eq!(cut(&family, 30), format!("{}…", "あ".repeat(14)));
        // By characters (a stored message): whole graphemes too.
        assert_eq!(cut_chars("abcdef", 6), "abcdef");
        assert_eq!(cut_chars("abcdefg", 6), "abcde…");
        assert_eq!(cut_chars("日本語のテキスト", 4), "日本語…");
        assert_eq!(cut_chars("ab👨‍👩‍👧cd", 6), "ab…");
        assert_eq!(cut_chars("ab👨‍👩‍👧cd", 8), "ab👨‍👩‍👧…");
        assert!(matches!(cut_chars("短い", 10), Cow::Borrowed(_)));
    }

    #[test]
    fn cut_start_keeps_the_end() {
        assert_eq!(cut_start("/srv/nightshift/store.db", 12), "…ft/store.db");
        assert_eq!(cut_start("/srv/データ/ストア.db", 11), "…/ストア.db");
        assert_eq!(cut_start("short", 10), "short");
    }

    #[test]
    fn pads_by_width() {
        assert_eq!(pad("記事", 6), "記事  ");
        assert_eq!(pad_left("記事", 6), "  記事");
        assert_eq!(pad("toolong", 3), "toolong");
        assert_eq!(fit("ブログ:技術記事", 9), "ブログ:… ");
        assert_eq!(width(&fit("ブログ:技術記事", 9)), 9);
        assert_eq!(fit("e\u{301}", 3), "e\u{301}  ");
    }

    #[test]
    fn wraps_japanese_by_width_with_nothing_dropped() {
        let lines = wrap(JA, 20);
        for l in &lines {
            assert!(width(l) <= 20, "{l:?} is {} cells", width(l));
        }
        assert_eq!(lines.concat(), JA);
        // Kinsoku: no line starts with 。 or a small kana.
        for l in &lines[1..] {
            let first = l.chars().next().unwrap();
            assert!(!"。、：ーっょ".contains(first), "{l:?}");
        }
        assert_eq!(lines[0], "投稿に失敗しました：");
    }

    #[test]
    fn wraps_words_at_spaces_and_breaks_long_words() {
        assert_eq!(wrap("the quick brown fox", 10), ["the quick ", "brown fox"]);
        assert_eq!(wrap("abcdefghijkl", 5), ["abcde", "fghij", "kl"]);
        assert_eq!(
            wrap("Exit3: exited 投稿に失敗しました", 16),
            ["Exit3: exited 投", "稿に失敗しました"]
        );
        assert_eq!(wrap("", 5), [""]);
        assert_eq!(wrap("🎉🎉🎉", 5), ["🎉🎉", "🎉"]);
        assert_eq!(wrap("🎉", 1), ["🎉"], "a grapheme wider than the line");
        let marks = "e\u{301}".repeat(7);
        let lines = wrap(&marks, 3);
        assert_eq!(
            lines,
            [
                "e\u{301}".repeat(3),
                "e\u{301}".repeat(3),
                "e\u{301}".into()
            ]
        );
    }

    proptest::proptest! {
        /// The printable-ASCII shortcut measures and cuts as the grapheme
        /// walk does, controls and `\r\n` (one grapheme) included.
        #[test]
        fn ascii_is_measured_and_cut_as_graphemes_are(
            s in "[ -~\t\r\n\x1b\x7f]{0,40}",
            max in 0usize..45,
        ) {
            let walked: usize = s.graphemes(true).map(cells).sum();
            proptest::prop_assert_eq!(width(&s), walked);
            let mut used = 0;
            let mut end = s.len();
            for (i, g) in s.grapheme_indices(true) {
                used += cells(g);
                if used > max {
                    end = i;
                    break;
                }
            }
            proptest::prop_assert_eq!(head(&s, max), &s[..end]);
        }

        #[test]
        fn wrap_keeps_every_grapheme_within_the_width(
            s in "[a-z 記事ブログ。、🎉\u{301}ｶﾞ]{0,60}",
            max in 1usize..30,
        ) {
            let lines = wrap(&s, max);
            for l in &lines {
                let single = l.graphemes(true).count() == 1;
                proptest::prop_assert!(width(l) <= max || single, "{:?}", l);
            }
            // Only the spaces lines broke at may be missing.
            let kept: String = lines.concat();
            let strip = |t: &str| t.replace(' ', "");
            proptest::prop_assert_eq!(strip(&kept), strip(&s));
            proptest::prop_assert!(kept.graphemes(true).count() <= s.graphemes(true).count());
        }

        #[test]
        fn cut_fits_and_only_cuts_what_does_not_fit(
            s in "[a-z 記事ブログ。🎉\u{301}]{0,40}",
            max in 0usize..30,
        ) {
            let c = cut(&s, max);
            proptest::prop_assert!(width(&c) <= max);
            if width(&s) <= max {
                proptest::prop_assert_eq!(&*c, s.as_str());
            } else if max > 0 {
                proptest::prop_assert!(c.ends_with(ELLIPSIS));
                proptest::prop_assert!(s.starts_with(c.trim_end_matches(ELLIPSIS)));
            }
        }
    }

    /// Halfwidth sound marks become what ratatui measures as a terminal
    /// draws them, the width unchanged where they compose.
    #[test]
    fn drawn_kana_replaced_in_order_is_drawable() {
        let replaced = |s: &str| {
            drawn_kana().iter().fold(s.to_string(), |t, (from, to)| {
                t.replace(from, &to.to_string())
            })
        };
        for s in ["ｶﾞｷﾞｸﾞ test", "ﾊﾟｿｺﾝ ﾎﾟｲﾝﾄ ｳﾞｧ", "aﾞ ｱﾟ", "ｦﾞﾜﾞﾞ", "東京"]
        {
            assert_eq!(replaced(s), drawable(s), "{s}");
        }
    }

    #[test]
    fn halfwidth_sound_marks_are_drawable() {
        use unicode_width::UnicodeWidthStr;
        assert_eq!(drawable("ｶﾞｷﾞｸﾞ test"), "ガギグ test");
        assert_eq!(drawable("ﾊﾟｿｺﾝ ﾎﾟｲﾝﾄ ｳﾞｧ"), "パｿｺﾝ ポｲﾝﾄ ヴｧ");
        assert_eq!(drawable("aﾞ ｱﾟ"), "a゛ ｱ゜");
        assert!(matches!(drawable("東京 ｶﾀｶﾅ"), Cow::Borrowed(_)));
        for s in ["ｶﾞｷﾞｸﾞ test", "ﾊﾟｿｺﾝ", "ﾃﾞｰﾀ"] {
            // ratatui's width of the drawable text is the terminal's of
            // the text as written (what `width` counts).
            assert_eq!(drawable(s).width(), width(s), "{s}");
        }
    }
}
