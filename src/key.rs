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

/// First 32 hex chars of SHA-256 of the canonical string.
pub fn hash_key(canonical: &str) -> String {
    let digest = Sha256::digest(canonical.as_bytes());
    let mut out = String::with_capacity(32);
    for byte in &digest[..16] {
        out.push_str(&format!("{byte:02x}"));
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
        parts.push(text.replace('\\', "\\\\").replace(':', "\\:"));
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
