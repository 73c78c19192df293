//! Where a JSON text broke, said as people count: serde_json counts its
//! columns in bytes, which in a line with Japanese text (three bytes a
//! character) points well past the place.

/// `e`, an error parsing `text`, with the place it names in characters:
/// `at column C` in a text of one line, else `at line L, column C`.
pub fn error_at(text: &str, e: &serde_json::Error) -> String {
    let msg = e.to_string();
    let Some(pos) = msg.rfind(" at line ") else {
        return msg;
    };
    let line = text
        .split('\n')
        .nth(e.line().saturating_sub(1))
        .unwrap_or("");
    // The column is one-based, or the bytes read on the line at its end:
    // either way, the characters starting before it.
    let column = line
        .char_indices()
        .take_while(|(i, _)| *i < e.column())
        .count();
    if text.contains('\n') {
        format!("{} at line {}, column {column}", &msg[..pos], e.line())
    } else {
        format!("{} at column {column}", &msg[..pos])
    }
}

/// The names a worker reports its cost and tokens under, wherever the
/// runner reads them (an answer, its `result` or `error`, a `usage`).
const REPORTED: [&str; 6] = [
    "cost",
    "usage",
    "input_tokens",
    "output_tokens",
    "prompt_tokens",
    "completion_tokens",
];

/// The text a value given twice is read as (see [`mark_reported_twice`]).
pub const GIVEN_TWICE: &str = "given twice in one object";

/// `value`, read from `text`, with every cost or token count the worker
/// gave twice in one object (`{"cost": 0.1, "cost": 5}`, three levels
/// deep at most: an answer's `result`'s `usage`'s counts) replaced by the
/// text [`GIVEN_TWICE`]. serde_json keeps the last silently; read so, the
/// report is refused as any cost or usage that is no number is (the item
/// fails as `InvalidCost` or `InvalidUsage`), as a budget summed from
/// either of two values would be a guess. A worker's answer is not refused
/// for a name twice elsewhere: what it means by its result is its own.
pub fn mark_reported_twice(text: &str, value: &mut serde_json::Value) {
    if !REPORTED.iter().any(|n| text.contains(n)) {
        return;
    }
    for path in twice(text, &REPORTED, &["result", "error"], 3) {
        let at = path
            .iter()
            .try_fold(&mut *value, |at, name| at.get_mut(name.as_str()));
        if let Some(at) = at {
            *at = serde_json::Value::String(GIVEN_TWICE.into());
        }
    }
}

/// `text`'s object, read once as serde_json reads it (a name given twice
/// keeps its last value), with the first of `names` it gives twice at its
/// top level (`{"key": "a", "result": 1, "key": "b"}`: `key`), as written
/// or spelled with escapes. `Err` for a text that is no JSON object.
pub fn object_naming_once<'n>(
    text: &str,
    names: &[&'n str],
) -> serde_json::Result<(serde_json::Map<String, serde_json::Value>, Option<&'n str>)> {
    let mut de = serde_json::Deserializer::from_str(text);
    let read = serde::de::DeserializeSeed::deserialize(Once { names }, &mut de)?;
    de.end()?;
    Ok(read)
}

/// Reads an object, noting the first of `names` given twice.
struct Once<'a, 'n> {
    names: &'a [&'n str],
}

impl<'de, 'n> serde::de::DeserializeSeed<'de> for Once<'_, 'n> {
    type Value = (serde_json::Map<String, serde_json::Value>, Option<&'n str>);
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, 'n> serde::de::Visitor<'de> for Once<'_, 'n> {
    type Value = (serde_json::Map<String, serde_json::Value>, Option<&'n str>);

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let (mut obj, mut first_twice) = (serde_json::Map::new(), None);
        while let Some(name) = map.next_key::<String>()? {
            let value = map.next_value()?;
            if first_twice.is_none() && obj.contains_key(&name) {
                first_twice = self.names.iter().find(|n| **n == name).copied();
            }
            obj.insert(name, value);
        }
        Ok((obj, first_twice))
    }
}

/// The paths of `names` given twice in one object of `text`, looking
/// `depth` objects down at most, into the values of `names` and `into`.
fn twice(text: &str, names: &[&str], into: &[&str], depth: usize) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let seed = Twice {
        names,
        into,
        depth,
        path: Vec::new(),
        found: &mut found,
    };
    let mut de = serde_json::Deserializer::from_str(text);
    if serde::de::DeserializeSeed::deserialize(seed, &mut de).is_err() {
        return Vec::new();
    }
    found
}

/// Finds the paths of names given twice (see [`twice`]).
struct Twice<'a> {
    names: &'a [&'a str],
    into: &'a [&'a str],
    depth: usize,
    path: Vec<String>,
    found: &'a mut Vec<Vec<String>>,
}

impl<'de> serde::de::DeserializeSeed<'de> for Twice<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Twice<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen: Vec<String> = Vec::new();
        while let Some(name) = map.next_key::<String>()? {
            let reported = self.names.contains(&name.as_str());
            if reported && seen.contains(&name) {
                let mut path = self.path.clone();
                path.push(name.clone());
                if !self.found.contains(&path) {
                    self.found.push(path);
                }
            }
            if self.depth > 0 && (reported || self.into.contains(&name.as_str())) {
                let mut path = self.path.clone();
                path.push(name.clone());
                map.next_value_seed(Twice {
                    names: self.names,
                    into: self.into,
                    depth: self.depth - 1,
                    path,
                    found: &mut *self.found,
                })?;
            } else {
                map.next_value::<serde::de::IgnoredAny>()?;
            }
            if reported {
                seen.push(name);
            }
        }
        Ok(())
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(())
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> String {
        error_at(
            text,
            &serde_json::from_str::<serde_json::Value>(text).unwrap_err(),
        )
    }

    /// A cost or count given twice is marked wherever it is read; the
    /// same name in two objects, or twice in data the runner does not
    /// read, is left alone.
    #[test]
    fn a_report_given_twice_is_marked() {
        let mark = |text: &str| {
            let mut v: serde_json::Value = serde_json::from_str(text).unwrap();
            mark_reported_twice(text, &mut v);
            v
        };
        let v = mark(r#"{"cost": 0.1, "x": 1, "cost": 5}"#);
        assert_eq!(v["cost"], GIVEN_TWICE);
        let v = mark(r#"{"key":"k","result":{"usage":{"input_tokens":1,"input_tokens":9}}}"#);
        assert_eq!(v["result"]["usage"]["input_tokens"], GIVEN_TWICE);
        let v = mark(r#"{"error":{"cost":1,"cost":2},"usage":{"output_tokens":3}}"#);
        assert_eq!(v["error"]["cost"], GIVEN_TWICE);
        assert_eq!(v["usage"]["output_tokens"], 3);
        for text in [
            r#"{"cost": 0.1, "items": [{"cost": 1}, {"cost": 2}]}"#,
            r#"{"result": {"data": {"cost": 1, "cost": 2}}, "cost": 0.5}"#,
            r#"{"title": "a", "title": "b", "cost": 0.5}"#,
        ] {
            let v = mark(text);
            assert_eq!(
                v,
                serde_json::from_str::<serde_json::Value>(text).unwrap(),
                "{text}"
            );
        }
    }

    /// A protocol name given twice at the top level is found, escaped
    /// too, the object read as serde_json reads it; the same name deeper
    /// down, or once, is not.
    #[test]
    fn a_name_given_twice_at_the_top_is_found() {
        let names = ["key", "result", "error", "op_id"];
        let find = |text: &str| object_naming_once(text, &names).unwrap().1;
        assert_eq!(find(r#"{"key":"a","result":1,"key":"b"}"#), Some("key"));
        assert_eq!(
            find(r#"{"key":"a","result":1,"\u006bey":"b"}"#),
            Some("key")
        );
        assert_eq!(find(r#"{"key":"a","result":1,"result":2}"#), Some("result"));
        assert_eq!(find(r#"{"key":"a","result":{"key":"b","key":"c"}}"#), None);
        assert_eq!(find(r#"{"key":"a","result":"\u9375 key"}"#), None);
        assert_eq!(find(r#"{"key":"a","title":"t","title":"u"}"#), None);
        for text in [
            r#"{"key":"a","result":1,"key":"b"}"#,
            r#"{"k": [1, {"x": 2.5}], "k": null}"#,
        ] {
            let (obj, _) = object_naming_once(text, &names).unwrap();
            assert_eq!(
                serde_json::Value::Object(obj),
                serde_json::from_str::<serde_json::Value>(text).unwrap()
            );
        }
        for bad in ["{", r#"{"a":1} x"#, "[1]"] {
            assert!(object_naming_once(bad, &names).is_err(), "{bad}");
        }
    }

    #[test]
    fn columns_count_characters_not_bytes() {
        assert_eq!(at(r#"{"k": x}"#), "expected value at column 7");
        // x is the 8th character, its 12th byte.
        assert_eq!(at(r#"{"キー": x}"#), "expected value at column 8");
        // Cut off in a string: the place is its last character.
        assert_eq!(
            at(r#"{"key":"x2", "title": "壊れた"#),
            "EOF while parsing a string at column 26"
        );
        assert_eq!(
            at("{\"a\": 1,\n \"タイトル\": ]}"),
            "expected value at line 2, column 10"
        );
        assert_eq!(at(""), "EOF while parsing a value at column 0");
    }
}
