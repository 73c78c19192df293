//! Idempotency keys and labels.
//!
//! A key says what an item *is*, never when or how often it ran, so the same
//! input gives the same key forever and a re-run can tell done work from new.
//! Either the item names its key (`"key": "..."`), or the key is the first 32
//! hex chars of SHA-256 over the canonical join of named natural-key fields
//! (`site:category:slug`); that canonical string is kept as the label.
//!
//! A number in a key (or a key field) is read from its text as written,
//! never through a 64-bit float: see [`number_key`]. Text is composed
//! (Unicode NFC) before it keys anything: see [`composed`].

use serde_json::Value;
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};
use unicode_normalization::{IsNormalized, UnicodeNormalization, is_nfc_quick};

use crate::config::fields::MAX_TOKEN_ESTIMATE;
use crate::model::NewItem;

/// Longest explicit key accepted; keys travel in environment variables and
/// terminal lines.
pub const MAX_KEY_LEN: usize = 512;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("not a JSON object")]
    NotObject,
    #[error("missing key field {0:?}")]
    MissingField(String),
    #[error("key field {0:?} must be a string, number or boolean, not {1}")]
    BadFieldType(String, &'static str),
    #[error(
        "no \"key\" field (give each item a \"key\", or name natural-key fields with --key-fields)"
    )]
    NoKey,
    #[error("\"key\" must be a non-empty string or number")]
    BadKey,
    #[error("key is longer than {MAX_KEY_LEN} characters")]
    KeyTooLong,
    #[error("key contains a control character")]
    ControlInKey,
    #[error("\"key\" is only blank space, which no view could show")]
    BlankKey,
    /// Every item whose key fields are all empty would share one key: the
    /// second "already present", never run.
    #[error(
        "every key field is empty or blank ({0}): such items would all share one key; give at least one a value"
    )]
    BlankFields(String),
}

/// How keys are derived for a batch.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum KeySpec {
    /// Each item carries a `key` field (and optionally a `label`).
    #[default]
    Explicit,
    /// Hash of these fields' values, in this order.
    Fields(Vec<String>),
}

impl KeySpec {
    /// What is wrong with a list of key fields, wherever it is given (the
    /// config's `key_fields`, `add --key-fields`): an empty name, or a
    /// name twice (`a,a` would key `x:x`, and the same list written once
    /// elsewhere would key every item anew).
    #[must_use]
    pub fn fields_problem(fields: &[String]) -> Option<String> {
        if fields.iter().any(|f| f.trim().is_empty()) {
            return Some("field names must not be empty".into());
        }
        fields
            .iter()
            .enumerate()
            .find(|(i, name)| fields[..*i].contains(name))
            .map(|(_, name)| format!("field {name:?} is listed twice"))
    }

    pub fn from_fields(fields: Option<&[String]>) -> KeySpec {
        match fields {
            Some(f) if !f.is_empty() => KeySpec::Fields(f.to_vec()),
            _ => KeySpec::Explicit,
        }
    }

    /// The spec as the store records it on a batch: `key`, or the fields
    /// as a JSON list in their order (the join is ordered, so `slug,site`
    /// keys every item otherwise than `site,slug`).
    #[must_use]
    pub fn stored(&self) -> String {
        match self {
            KeySpec::Explicit => EXPLICIT_STORED.to_string(),
            KeySpec::Fields(fields) => serde_json::to_string(fields).unwrap_or_default(),
        }
    }

    /// The spec [`KeySpec::stored`] wrote; `None` for text it never writes.
    #[must_use]
    pub fn from_stored(text: &str) -> Option<KeySpec> {
        if text == EXPLICIT_STORED {
            return Some(KeySpec::Explicit);
        }
        let fields: Vec<String> = serde_json::from_str(text).ok()?;
        (!fields.is_empty()).then_some(KeySpec::Fields(fields))
    }

    /// The spec for `--json`: `"key"`, or the list of fields.
    #[must_use]
    pub fn json(&self) -> Value {
        match self {
            KeySpec::Explicit => Value::from(EXPLICIT_STORED),
            KeySpec::Fields(fields) => Value::from(fields.clone()),
        }
    }
}

/// How the store records [`KeySpec::Explicit`]; a list of fields is
/// recorded as JSON, which never reads so.
const EXPLICIT_STORED: &str = "key";

/// As a message says it: `key_fields ["site", "slug"]`, or `each item's
/// "key" field`.
impl std::fmt::Display for KeySpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeySpec::Explicit => f.write_str("each item's \"key\" field (no key_fields)"),
            KeySpec::Fields(fields) => {
                let names: Vec<String> = fields.iter().map(|n| format!("{n:?}")).collect();
                write!(f, "key_fields [{}]", names.join(", "))
            }
        }
    }
}

/// Deepest nesting of a payload (serde_json's limit when reading a value).
pub const MAX_DEPTH: usize = 127;

/// Why one input line could not become an item.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    #[error("malformed JSON: {0}")]
    Json(String),
    /// Most often a file saved as Shift_JIS (Excel's CSV, Notepad's
    /// "ANSI" on a Japanese Windows).
    #[error(
        "not valid UTF-8 (the byte 0x{byte:02X} at column {column}): JSON lines are UTF-8; \
         save it as UTF-8 (from Shift_JIS: iconv -f SHIFT_JIS -t UTF-8)"
    )]
    NotUtf8 { byte: u8, column: usize },
    #[error(
        "starts with a byte-order mark (U+FEFF): only the first line of an input may have one \
         (were files joined?)"
    )]
    Bom,
    /// An old Mac file (or a `printf '%s\r'` source): its whole input is
    /// one line, which JSON called "trailing characters".
    #[error(
        "lines end in CR only (\\r), as in old Mac files, so this line holds several: \
         convert them to newlines (tr '\\r' '\\n' < FILE > NEW); CRLF is read as it is"
    )]
    CrOnly,
    /// A name twice in one object (`{"key":"a","key":"b"}`), at any depth:
    /// which one counts differs between readers (serde_json and Python's
    /// `json` take the last, others the first or refuse it), so the key,
    /// or what the worker reads, would not be the one a person sees first.
    #[error("{0}: JSON readers differ on which one counts, so give each name once")]
    NameTwice(String),
    #[error(transparent)]
    Key(#[from] KeyError),
    #[error("priority field {0:?} must be an integer from {min} to {max}, not {1}", min = i32::MIN, max = i32::MAX)]
    BadPriority(String, String),
    #[error("estimate field {0:?} must be a whole number of tokens from 0 to {max}, not {1}", max = MAX_TOKEN_ESTIMATE)]
    BadEstimate(String, String),
}

/// What a line's own fields say beyond its key. Its claim priority: a
/// field of its line, if the batch names one (`priority_field`), else
/// `default` (`add --priority`). Its token estimate (`estimate_field`),
/// read by the runner but checked here: a bad one was ignored unsaid at
/// every call, so it refuses the line as a bad priority does.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LineFields {
    pub field: Option<String>,
    pub default: i32,
    pub estimate_field: Option<String>,
}

/// The UTF-8 byte-order mark that Excel and Windows editors put at the start
/// of a file.
const BOM: &str = "\u{feff}";

/// The input without a byte-order mark at its very start. Only there is it
/// a mark; anywhere else [`derive_line`] names it.
pub fn without_bom(input: &[u8]) -> &[u8] {
    input.strip_prefix(BOM.as_bytes()).unwrap_or(input)
}

/// One line of an input (a `\r` before its newline already cut) as text:
/// where it stops being UTF-8 otherwise, never mended (two keys mended
/// alike would become one item).
pub fn line_text(raw: &[u8]) -> Result<&str, LineError> {
    std::str::from_utf8(raw).map_err(|e| {
        let good = &raw[..e.valid_up_to()];
        LineError::NotUtf8 {
            byte: raw[good.len()],
            column: String::from_utf8_lossy(good).chars().count() + 1,
        }
    })
}

/// Parses one JSON line and derives its item. The whole object is the
/// payload, kept as the text given. Only the fields the key needs are kept
/// (as their raw text, so numbers keep every digit); the rest of the object
/// is checked but never allocated, which makes `add` of a million lines
/// several times faster than building a full `Value` per line.
pub fn derive_line(text: &str, spec: &KeySpec) -> Result<NewItem, LineError> {
    derive_line_with(text, spec, &LineFields::default())
}

/// [`derive_line`], with the item's priority read from `fields.field`
/// where the line has it (an integer), else `fields.default`, and its
/// `fields.estimate_field` checked where the line has it.
pub fn derive_line_with(
    text: &str,
    spec: &KeySpec,
    fields: &LineFields,
) -> Result<NewItem, LineError> {
    if text.starts_with(BOM) {
        return Err(LineError::Bom);
    }
    let wanted: &[String] = match spec {
        KeySpec::Explicit => &[],
        KeySpec::Fields(fields) => fields,
    };
    let mut de = serde_json::Deserializer::from_str(text);
    let also = [fields.field.as_deref(), fields.estimate_field.as_deref()];
    let kept = serde::Deserializer::deserialize_any(&mut de, KeptFields { wanted, also })
        .and_then(|kept| de.end().map(|()| kept))
        .map_err(|e| {
            if cr_only(text) {
                return LineError::CrOnly;
            }
            // Every field is read as its later readers read the payload (a
            // skipped one as [`Checked`]): nesting past their limit, a lone
            // surrogate, a number out of range are refused here.
            let msg = e.to_string();
            if msg.contains("recursion limit") {
                LineError::Json(format!("nested more than {MAX_DEPTH} levels deep"))
            } else if msg.starts_with(NAME_TWICE) {
                LineError::NameTwice(crate::util::json::error_at(text, &e))
            } else {
                LineError::Json(crate::util::json::error_at(text, &e))
            }
        })?;
    let raw = kept.ok_or(KeyError::NotObject)?;
    let obj = Fields::read(&raw)?;
    let (key, label, written_key) = match spec {
        KeySpec::Explicit => explicit_key(&obj)?,
        KeySpec::Fields(fields) => {
            let written = canonical_join(&obj, fields)?;
            match composed(&written) {
                None => (hash_key(&written), storable_label(written), None),
                Some(canonical) => (
                    hash_key(&canonical),
                    storable_label(canonical),
                    Some(hash_key(&written)),
                ),
            }
        }
    };
    let priority = match fields
        .field
        .as_deref()
        .and_then(|f| obj.get(f).map(|v| (f, v)))
    {
        None => fields.default,
        Some((name, value)) => priority_of(name, value)?,
    };
    if let Some((name, value)) = fields
        .estimate_field
        .as_deref()
        .and_then(|f| obj.get(f).map(|v| (f, v)))
    {
        estimate_of(name, value)?;
    }
    Ok(NewItem {
        key,
        label,
        payload: text.trim().to_string(),
        priority,
        not_before: None,
        written_key,
    })
}

/// Whether `text`, which did not parse, is JSON lines ended by a bare CR
/// rather than a newline: a JSON value before its first CR, and more after
/// it. (A CR is whitespace between JSON tokens, and cannot be in a string
/// unescaped, so a line that parses is never this.)
fn cr_only(text: &str) -> bool {
    let mut pieces = text.split('\r');
    let first = pieces.next().unwrap_or_default();
    serde_json::from_str::<serde::de::IgnoredAny>(first).is_ok()
        && pieces.any(|p| !p.trim().is_empty())
}

/// `text` composed (Unicode NFC), where that is not `text` itself: `None`
/// for text already composed, which is nearly all (ASCII, kanji, kana
/// typed on a keyboard). The same word may come in two forms: `が` as one
/// character, or as `か` and a combining `゛` (macOS file names, some
/// exports). Byte for byte they were two keys, so the same item, added in
/// each form, was two items and ran twice; composed, they are one. Only
/// canonical forms are made one: full-width `ＡＢＣ` stays apart from
/// `ABC`, as compatibility forms can mean different things.
#[must_use]
pub fn composed(text: &str) -> Option<String> {
    match is_nfc_quick(text.chars()) {
        IsNormalized::Yes => None,
        IsNormalized::No | IsNormalized::Maybe => {
            let nfc: String = text.nfc().collect();
            (nfc != text).then_some(nfc)
        }
    }
}

/// The forms a key a person typed may be stored under, the most likely
/// first: as given, composed (NFC: as `add` keys items), and decomposed
/// (NFD: as an item added before keys were composed kept a key written so,
/// from a macOS file name), each once. See `Store::held_key`.
#[must_use]
pub fn stored_forms(name: &str) -> Vec<String> {
    let mut forms = vec![name.to_string()];
    let nfd: String = name.nfd().collect();
    for form in [composed(name), Some(nfd)].into_iter().flatten() {
        if !forms.contains(&form) {
            forms.push(form);
        }
    }
    forms
}

/// A priority field's value: an integer that fits an `i32`.
fn priority_of(name: &str, value: &Field) -> Result<i32, LineError> {
    let shown = match value {
        Field::Number(n) => match n.parse::<i32>() {
            Ok(p) => return Ok(p),
            Err(_) => n.clone(),
        },
        Field::Text(s) => format!("the string {s:?}"),
        Field::Bool(b) => b.to_string(),
        Field::Other(kind) => (*kind).to_string(),
    };
    Err(LineError::BadPriority(name.to_string(), shown))
}

/// Whether `value` is a token estimate: a whole number from 0 to
/// [`MAX_TOKEN_ESTIMATE`]. The runner reserves a payload's estimate by
/// this rule ([`estimate_in`]); `add` refuses a line that breaks it.
#[must_use]
pub fn estimate_in(value: &Value) -> Option<u64> {
    value
        .as_u64()
        .filter(|n| *n <= MAX_TOKEN_ESTIMATE.unsigned_abs())
}

/// An estimate field's value, by [`estimate_in`].
fn estimate_of(name: &str, value: &Field) -> Result<u64, LineError> {
    let shown = match value {
        Field::Number(n) => match serde_json::from_str::<Value>(n)
            .ok()
            .as_ref()
            .and_then(estimate_in)
        {
            Some(e) => return Ok(e),
            None => n.clone(),
        },
        Field::Text(s) => format!("the string {s:?}"),
        Field::Bool(b) => b.to_string(),
        Field::Other(kind) => (*kind).to_string(),
    };
    Err(LineError::BadEstimate(name.to_string(), shown))
}

/// The kept top-level fields of one line, read.
struct Fields(Vec<(String, Field)>);

/// One kept field, as a key can use it.
enum Field {
    Text(String),
    /// A number's [`number_key`].
    Number(String),
    Bool(bool),
    /// Anything else, by what it is ("null", "an array", "an object").
    Other(&'static str),
}

impl Fields {
    /// Reads the raw fields. A value serde_json could not read back later
    /// (a number out of range, nesting too deep) refuses the line, as it
    /// would anywhere else in the payload.
    fn read(raw: &[(String, &RawValue)]) -> Result<Fields, LineError> {
        let mut fields = Vec::with_capacity(raw.len());
        for (name, raw) in raw {
            let value: Value = serde_json::from_str(raw.get()).map_err(|e| {
                let msg = e.to_string();
                let msg = msg
                    .rfind(" at line ")
                    .map_or(msg.as_str(), |pos| &msg[..pos]);
                LineError::Json(format!("{msg} in field {name:?}"))
            })?;
            let field = match value {
                Value::String(s) => Field::Text(s),
                Value::Number(_) => Field::Number(number_key(raw.get(), &value)),
                Value::Bool(b) => Field::Bool(b),
                Value::Null => Field::Other("null"),
                Value::Array(_) => Field::Other("an array"),
                Value::Object(_) => Field::Other("an object"),
            };
            fields.push((name.clone(), field));
        }
        Ok(Fields(fields))
    }

    fn get(&self, name: &str) -> Option<&Field> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, f)| f)
    }
}

/// The key text of a JSON number, from `raw`, its text as written (`value`
/// is that text parsed).
///
/// Keys used to be serde_json's display of the parsed number, which goes
/// through a 64-bit float for anything beyond i64/u64 or with a fraction:
/// `12345678901234567890123` and `12345678901234567890124` both became
/// `1.2345678901234568e22`, one key for two items. The rule now: that same
/// display where it is exact (it denotes the very number written), so every
/// key that was right before stays byte-identical (`42`, `1500.0` for
/// `1.5e3`, `0.1`); else the text as written (`12345678901234567890123`).
/// Either way the key denotes exactly the number written, so two different
/// numbers can never share a key, and the same text always gives the same
/// key. Raw text rather than serde_json's `arbitrary_precision`, which would
/// change `Number` for the whole crate and so every other reader of numbers.
pub fn number_key(raw: &str, value: &Value) -> String {
    let shown = value.to_string();
    match decimal(&shown) {
        Some(exact) if decimal(raw).as_ref() == Some(&exact) => shown,
        _ => raw.to_string(),
    }
}

/// A JSON number as an exact decimal: (negative, significant digits without
/// leading or trailing zeros, power of ten). Zero is `(false, "", 0)`
/// whatever its sign or exponent. `None` for an exponent out of `i64`.
fn decimal(text: &str) -> Option<(bool, String, i64)> {
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(at) => (&unsigned[..at], &unsigned[at + 1..]),
        None => (unsigned, "0"),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all = format!("{int}{frac}");
    let digits = all.trim_start_matches('0');
    let significant = digits.trim_end_matches('0');
    if significant.is_empty() {
        return Some((false, String::new(), 0));
    }
    let trailing = i64::try_from(digits.len() - significant.len()).ok()?;
    let frac_len = i64::try_from(frac.len()).ok()?;
    let power = exponent
        .parse::<i64>()
        .ok()?
        .checked_sub(frac_len)?
        .checked_add(trailing)?;
    Some((negative, significant.to_string(), power))
}

/// A value the line's key does not read, checked as every later reader of
/// the payload reads it, and dropped: a number is read as one (`1e999`,
/// out of an `f64`'s range, is refused, where `IgnoredAny` took any
/// number's syntax and the payload was stored, then shown by every JSON
/// view as a string); nothing is kept.
struct Checked;

impl<'de> serde::Deserialize<'de> for Checked {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Checked, D::Error> {
        d.deserialize_any(CheckedVisitor)
    }
}

struct CheckedVisitor;

impl<'de> serde::de::Visitor<'de> for CheckedVisitor {
    type Value = Checked;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_str<E>(self, _: &str) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_unit<E>(self) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Checked, A::Error> {
        while seq.next_element::<Checked>()?.is_some() {}
        Ok(Checked)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Checked, A::Error> {
        let mut names = Names::default();
        while let Some(name) = map.next_key::<FieldName<'de>>()? {
            names.note(&name)?;
            map.next_value::<Checked>()?;
        }
        Ok(Checked)
    }
}

/// Visits a JSON value keeping only the named top-level fields of an object
/// (`key` and `label` when `wanted` is empty), as their raw text. `None`:
/// not an object.
struct KeptFields<'a> {
    wanted: &'a [String],
    /// More fields to keep (the priority and estimate fields).
    also: [Option<&'a str>; 2],
}

impl KeptFields<'_> {
    fn keeps(&self, name: &str) -> bool {
        if self.also.contains(&Some(name)) {
            true
        } else if self.wanted.is_empty() {
            name == "key" || name == "label"
        } else {
            self.wanted.iter().any(|w| w == name)
        }
    }
}

impl<'de> serde::de::Visitor<'de> for KeptFields<'_> {
    type Value = Option<Vec<(String, &'de RawValue)>>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut kept: Vec<(String, &'de RawValue)> = Vec::new();
        let mut names = Names::default();
        while let Some(name) = map.next_key::<FieldName<'de>>()? {
            // Refused before its value is read: the error's column is
            // the repeated name's.
            names.note(&name)?;
            if self.keeps(name.as_str()) {
                let raw = map.next_value::<&'de RawValue>()?;
                kept.push((name.into_string(), raw));
            } else {
                map.next_value::<Checked>()?;
            }
        }
        Ok(Some(kept))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<Checked>()?.is_some() {}
        Ok(None)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
}

/// How the error of a name given twice starts (see [`LineError::NameTwice`]).
const NAME_TWICE: &str = "the name ";

/// The names of one object read so far, as they read (escapes undone:
/// `"k\u0065y"` is `"key"`), to refuse one given twice. A short list
/// scanned, as nearly all objects are small; a set past that.
#[derive(Default)]
struct Names<'de> {
    few: Vec<FieldName<'de>>,
    many: std::collections::HashSet<String>,
}

impl<'de> Names<'de> {
    /// Notes `name`, or the error of a name noted before.
    fn note<E: serde::de::Error>(&mut self, name: &FieldName<'de>) -> Result<(), E> {
        const FEW: usize = 16;
        let twice = if self.few.len() < FEW {
            let twice = self.few.iter().any(|n| n.as_str() == name.as_str());
            self.few.push(name.clone());
            twice
        } else {
            if self.many.is_empty() {
                self.many = self.few.iter().map(|n| n.as_str().to_string()).collect();
            }
            !self.many.insert(name.as_str().to_string())
        };
        if twice {
            return Err(E::custom(format!(
                "{NAME_TWICE}{:?} is given twice in one object",
                name.as_str()
            )));
        }
        Ok(())
    }
}

/// An object's field name, borrowed from the line unless it has escapes.
#[derive(Clone)]
enum FieldName<'de> {
    Borrowed(&'de str),
    Owned(String),
}

impl FieldName<'_> {
    fn as_str(&self) -> &str {
        match self {
            FieldName::Borrowed(s) => s,
            FieldName::Owned(s) => s,
        }
    }

    fn into_string(self) -> String {
        match self {
            FieldName::Borrowed(s) => s.to_string(),
            FieldName::Owned(s) => s,
        }
    }
}

impl<'de> serde::Deserialize<'de> for FieldName<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = FieldName<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a field name")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<FieldName<'de>, E> {
                Ok(FieldName::Borrowed(s))
            }
            fn visit_str<E>(self, s: &str) -> Result<FieldName<'de>, E> {
                Ok(FieldName::Owned(s.to_string()))
            }
        }
        d.deserialize_str(V)
    }
}

/// What a table's LABEL column holds beside the KEY column: the label,
/// or nothing when it is only the key again.
pub fn label_column<'a>(key: &str, label: &'a str) -> &'a str {
    if label == key { "" } else { label }
}

/// An item named for a person: its label with its key beside it, or the
/// key alone when the label is the key. Not made inert.
pub fn named(key: &str, label: &str) -> String {
    if label.is_empty() || label == key {
        key.to_string()
    } else {
        format!("{label} ({key})")
    }
}

/// First 32 hex chars of SHA-256 of the canonical string.
pub fn hash_key(canonical: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digest = Sha256::digest(canonical.as_bytes());
    let mut out = String::with_capacity(32);
    for byte in &digest[..16] {
        out.push(char::from(HEX[usize::from(byte >> 4)]));
        out.push(char::from(HEX[usize::from(byte & 0x0f)]));
    }
    out
}

/// `a:b:c`, with `\` and `:` inside values escaped so two different field
/// tuples can never join to the same string.
fn canonical_join(obj: &Fields, fields: &[String]) -> Result<String, KeyError> {
    let mut parts = Vec::with_capacity(fields.len());
    let mut blank = true;
    for field in fields {
        let value = obj
            .get(field)
            .ok_or_else(|| KeyError::MissingField(field.clone()))?;
        let text =
            scalar_text(value).map_err(|kind| KeyError::BadFieldType(field.clone(), kind))?;
        blank &= text.trim().is_empty();
        if text.contains([':', '\\']) {
            parts.push(text.replace('\\', "\\\\").replace(':', "\\:"));
        } else {
            parts.push(text);
        }
    }
    if blank {
        return Err(KeyError::BlankFields(fields.join(", ")));
    }
    Ok(parts.join(":"))
}

/// The key, label and written key (see [`NewItem::written_key`]) of an
/// item naming its own key.
fn explicit_key(obj: &Fields) -> Result<(String, String, Option<String>), KeyError> {
    let (key, written_key) = match obj.get("key").ok_or(KeyError::NoKey)? {
        Field::Text(s) => match composed(s) {
            Some(nfc) => (nfc, Some(s.clone())),
            None => (s.clone(), None),
        },
        Field::Number(s) => (s.clone(), None),
        Field::Bool(_) | Field::Other(_) => return Err(KeyError::BadKey),
    };
    if key.is_empty() {
        return Err(KeyError::BadKey);
    }
    if key.chars().count() > MAX_KEY_LEN {
        return Err(KeyError::KeyTooLong);
    }
    if key.chars().any(char::is_control) {
        return Err(KeyError::ControlInKey);
    }
    if key.trim().is_empty() {
        return Err(KeyError::BlankKey);
    }
    let label = match obj.get("label") {
        Some(Field::Text(s)) if !s.is_empty() => storable_label(s.clone()),
        _ => key.clone(),
    };
    Ok((key, label, written_key))
}

/// A label as every store can keep it: a NUL, which PostgreSQL's text
/// cannot hold (the whole add failed there, and worked on SQLite), is
/// kept as the `\x00` every view shows it as. The key is made from the
/// text as given.
fn storable_label(label: String) -> String {
    if label.contains('\0') {
        label.replace('\0', "\\x00")
    } else {
        label
    }
}

fn scalar_text(field: &Field) -> Result<String, &'static str> {
    match field {
        Field::Text(s) | Field::Number(s) => Ok(s.clone()),
        Field::Bool(b) => Ok(b.to_string()),
        Field::Other(kind) => Err(kind),
    }
}

#[cfg(test)]
mod tests;
