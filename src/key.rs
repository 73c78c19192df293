//! Idempotency keys and labels.
//!
//! A key says what an item *is*, never when or how often it ran, so the same
//! input gives the same key forever and a re-run can tell done work from new.
//! Either the item names its key (`"key": "..."`), or the key is the first 32
//! hex chars of SHA-256 over the canonical join of named natural-key fields
//! (`site:category:slug`); that canonical string is kept as the label.

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

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
    pub fn from_fields(fields: Option<&[String]>) -> KeySpec {
        match fields {
            Some(f) if !f.is_empty() => KeySpec::Fields(f.to_vec()),
            _ => KeySpec::Explicit,
        }
    }
}

/// Turns one JSON line (`text`, already parsed as `value`) into an item.
/// The whole object is the payload, kept as the text given.
pub fn derive(text: &str, value: &Value, spec: &KeySpec) -> Result<NewItem, KeyError> {
    let Value::Object(obj) = value else {
        return Err(KeyError::NotObject);
    };
    let (key, label) = match spec {
        KeySpec::Explicit => explicit_key(obj)?,
        KeySpec::Fields(fields) => {
            let canonical = canonical_join(obj, fields)?;
            (hash_key(&canonical), canonical)
        }
    };
    Ok(NewItem {
        key,
        label,
        payload: text.trim().to_string(),
    })
}

/// Deepest nesting of a payload (serde_json's limit when reading a value).
pub const MAX_DEPTH: usize = 127;

/// Why one input line could not become an item.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    #[error("malformed JSON: {0}")]
    Json(String),
    #[error(transparent)]
    Key(#[from] KeyError),
}

/// Parses one JSON line and derives its item, like [`derive`] on the parsed
/// value. Only the fields the key needs are built; the rest of the object is
/// checked but never allocated, which makes `add` of a million lines several
/// times faster than building a full `Value` per line.
pub fn derive_line(text: &str, spec: &KeySpec) -> Result<NewItem, LineError> {
    let wanted: &[String] = match spec {
        KeySpec::Explicit => &[],
        KeySpec::Fields(fields) => fields,
    };
    let mut de = serde_json::Deserializer::from_str(text);
    let kept = serde::Deserializer::deserialize_any(&mut de, KeptFields { wanted })
        .and_then(|kept| de.end().map(|()| kept))
        .map_err(|e| LineError::Json(json_error(&e)))?;
    let obj = kept.ok_or(KeyError::NotObject)?;
    // Skipped fields are checked without a depth limit, but every later
    // reader of the payload parses it into a `Value`, which stops at 128
    // levels: refuse what could not be read back. Counting brackets first
    // keeps the common line cheap.
    if text.bytes().filter(|b| matches!(b, b'[' | b'{')).count() >= MAX_DEPTH
        && serde_json::from_str::<Value>(text).is_err()
    {
        return Err(LineError::Json(format!(
            "nested more than {MAX_DEPTH} levels deep"
        )));
    }
    let (key, label) = match spec {
        KeySpec::Explicit => explicit_key(&obj)?,
        KeySpec::Fields(fields) => {
            let canonical = canonical_join(&obj, fields)?;
            (hash_key(&canonical), canonical)
        }
    };
    Ok(NewItem {
        key,
        label,
        payload: text.trim().to_string(),
    })
}

/// serde_json's message with its position said once: the caller names the
/// line, so "at line 1" would only mislead.
fn json_error(e: &serde_json::Error) -> String {
    let msg = e.to_string();
    match msg.rfind(" at line ") {
        Some(pos) => format!("{} (column {})", &msg[..pos], e.column()),
        None => msg,
    }
}

/// Visits a JSON value keeping only the named top-level fields of an object
/// (`key` and `label` when `wanted` is empty). `None`: not an object.
struct KeptFields<'a> {
    wanted: &'a [String],
}

impl KeptFields<'_> {
    fn keeps(&self, name: &str) -> bool {
        if self.wanted.is_empty() {
            name == "key" || name == "label"
        } else {
            self.wanted.iter().any(|w| w == name)
        }
    }
}

impl<'de> serde::de::Visitor<'de> for KeptFields<'_> {
    type Value = Option<Map<String, Value>>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut kept = Map::new();
        while let Some(name) = map.next_key::<FieldName<'de>>()? {
            if self.keeps(name.as_str()) {
                // A repeated field: the last one wins, as with a full parse.
                kept.insert(name.into_string(), map.next_value::<Value>()?);
            } else {
                map.next_value::<serde::de::IgnoredAny>()?;
            }
        }
        Ok(Some(kept))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
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

/// An object's field name, borrowed from the line unless it has escapes.
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
pub fn canonical_join(obj: &Map<String, Value>, fields: &[String]) -> Result<String, KeyError> {
    let mut parts = Vec::with_capacity(fields.len());
    for field in fields {
        let value = obj
            .get(field)
            .ok_or_else(|| KeyError::MissingField(field.clone()))?;
        let text =
            scalar_text(value).map_err(|kind| KeyError::BadFieldType(field.clone(), kind))?;
        if text.contains([':', '\\']) {
            parts.push(text.replace('\\', "\\\\").replace(':', "\\:"));
        } else {
            parts.push(text);
        }
    }
    Ok(parts.join(":"))
}

fn explicit_key(obj: &Map<String, Value>) -> Result<(String, String), KeyError> {
    let raw = obj.get("key").ok_or(KeyError::NoKey)?;
    let key = match raw {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => return Err(KeyError::BadKey),
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
    let label = match obj.get("label") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        _ => key.clone(),
    };
    Ok((key, label))
}

fn scalar_text(value: &Value) -> Result<String, &'static str> {
    match value {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        Value::Null => Err("null"),
        Value::Array(_) => Err("an array"),
        Value::Object(_) => Err("an object"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn d(v: Value, spec: &KeySpec) -> Result<NewItem, KeyError> {
        derive(&v.to_string(), &v, spec)
    }

    fn fields(f: &[&str]) -> KeySpec {
        KeySpec::Fields(f.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn natural_key_is_stable_and_label_is_canonical() {
        let spec = fields(&["site", "category", "slug"]);
        let a = d(
            json!({"site":"blog","category":"rust","slug":"hello","n":1}),
            &spec,
        )
        .unwrap();
        let b = d(
            json!({"slug":"hello","category":"rust","site":"blog","n":2}),
            &spec,
        )
        .unwrap();
        assert_eq!(a.key, b.key, "field order and other fields do not matter");
        assert_eq!(a.label, "blog:rust:hello");
        // Pinned: the same input must give this key forever.
        assert_eq!(a.key, hash_key("blog:rust:hello"));
        assert_eq!(a.key.len(), 32);
        assert_eq!(hash_key("abc"), "ba7816bf8f01cfea414140de5dae2223");
    }

    #[test]
    fn colons_inside_values_cannot_collide() {
        let spec = fields(&["a", "b"]);
        let x = d(json!({"a":"x:y","b":"z"}), &spec).unwrap();
        let y = d(json!({"a":"x","b":"y:z"}), &spec).unwrap();
        assert_ne!(x.key, y.key);
    }

    /// The fast line parser agrees with a full parse, and names bad JSON.
    #[test]
    fn derive_line_matches_a_full_parse() {
        let specs = [KeySpec::Explicit, fields(&["site", "slug"])];
        let lines = [
            r#"{"key":"a","label":"A","x":[1,{"y":null}]}"#,
            r#"{"key":7}"#,
            r#"{"key":1.5e3}"#,
            r#"{"key":"a","key":"b"}"#,
            r#"{"k\u0065y":"esc","label":""}"#,
            r#"{"site":"s:1","slug":true,"other":"x"}"#,
            r#"{"site":"s","slug":null}"#,
            r#"{"site":"s"}"#,
            r#"  {"key":"padded"}  "#,
            r#"[1,2]"#,
            r#""text""#,
            r#"42"#,
            r#"null"#,
            r#"{}"#,
        ];
        for spec in &specs {
            for line in lines {
                let value: Value = serde_json::from_str(line).unwrap();
                let full = derive(line, &value, spec).map_err(LineError::Key);
                assert_eq!(derive_line(line, spec), full, "{line} with {spec:?}");
            }
        }
        for bad in [
            r#"{"key":"a""#,
            r#"{"key":"a"} x"#,
            r#"{"key":01}"#,
            "{bad",
            "nope",
        ] {
            match derive_line(bad, &KeySpec::Explicit) {
                Err(LineError::Json(msg)) => {
                    assert!(msg.contains("column"), "{bad}: {msg}");
                    assert!(!msg.contains("line 1"), "{bad}: {msg}");
                }
                other => panic!("{bad}: {other:?}"),
            }
        }
    }

    #[test]
    fn explicit_keys_and_errors() {
        let item = d(json!({"key": 42, "label": "answer"}), &KeySpec::Explicit).unwrap();
        assert_eq!((item.key.as_str(), item.label.as_str()), ("42", "answer"));
        assert_eq!(d(json!({"x":1}), &KeySpec::Explicit), Err(KeyError::NoKey));
        assert_eq!(
            d(json!({"key":""}), &KeySpec::Explicit),
            Err(KeyError::BadKey)
        );
        assert_eq!(
            d(json!({"key":"a\u{1b}b"}), &KeySpec::Explicit),
            Err(KeyError::ControlInKey)
        );
        assert_eq!(d(json!([1]), &KeySpec::Explicit), Err(KeyError::NotObject));
        assert_eq!(
            d(json!({"site":"a"}), &fields(&["site", "slug"])),
            Err(KeyError::MissingField("slug".into()))
        );
        assert_eq!(
            d(json!({"site":null}), &fields(&["site"])),
            Err(KeyError::BadFieldType("site".into(), "null"))
        );
    }
}
