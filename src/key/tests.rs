//! The key rules, line by line: derived, explicit, numbers, priorities.

use super::*;
use serde_json::json;

fn d(v: Value, spec: &KeySpec) -> Result<NewItem, LineError> {
    derive_line(&v.to_string(), spec)
}

fn key_error(e: KeyError) -> Result<NewItem, LineError> {
    Err(LineError::Key(e))
}

/// A lone surrogate in a field the key does not read was accepted and
/// stored, and then no reader could parse the payload (found by
/// `hostile::import_lines_never_panic`). A whole pair is a character.
#[test]
fn a_lone_surrogate_anywhere_is_refused_and_a_pair_is_kept() {
    for line in [
        r#"{"key":"a","note":"\ud800x"}"#,
        r#"{"key":"a","deep":["\uDC00"]}"#,
        r#"{"key":"a","note":"\ud83d"}"#,
    ] {
        match derive_line(line, &KeySpec::Explicit) {
            Err(LineError::Json(msg)) => {
                assert!(
                    msg.contains("surrogate") || msg.contains("escape"),
                    "{line}: {msg}"
                )
            }
            other => panic!("{line}: {other:?}"),
        }
    }
    let item = derive_line(r#"{"key":"a","note":"\ud83d\ude00"}"#, &KeySpec::Explicit).unwrap();
    assert!(serde_json::from_str::<Value>(&item.payload).is_ok());
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

/// The priority field's integer where the line has it, the default
/// where it has not; anything else names the field and the value. The
/// field is read beside the key fields without changing the key.
#[test]
fn the_priority_field_is_an_integer_or_the_default() {
    let p = LineFields {
        field: Some("prio".into()),
        default: 2,
        estimate_field: None,
    };
    let with = |v: Value, spec: &KeySpec| derive_line_with(&v.to_string(), spec, &p);
    assert_eq!(
        with(json!({"key": "a", "prio": -7}), &KeySpec::Explicit)
            .unwrap()
            .priority,
        -7
    );
    assert_eq!(
        with(json!({"key": "a"}), &KeySpec::Explicit)
            .unwrap()
            .priority,
        2
    );
    let keyed = with(json!({"site": "s", "prio": 5}), &fields(&["site"])).unwrap();
    assert_eq!((keyed.priority, keyed.label.as_str()), (5, "s"));
    assert_eq!(
        keyed.key,
        d(json!({"site": "s"}), &fields(&["site"])).unwrap().key
    );
    let bad = |v: Value| with(v, &KeySpec::Explicit).unwrap_err().to_string();
    let range = "must be an integer from -2147483648 to 2147483647";
    assert_eq!(
        bad(json!({"key": "a", "prio": 2.5})),
        format!("priority field \"prio\" {range}, not 2.5")
    );
    assert_eq!(
        bad(json!({"key": "a", "prio": "9"})),
        format!("priority field \"prio\" {range}, not the string \"9\"")
    );
    assert_eq!(
        bad(json!({"key": "a", "prio": [1]})),
        format!("priority field \"prio\" {range}, not an array")
    );
    assert_eq!(
        bad(json!({"key": "a", "prio": 2_147_483_648_i64})),
        format!("priority field \"prio\" {range}, not 2147483648")
    );
}

#[test]
fn colons_inside_values_cannot_collide() {
    let spec = fields(&["a", "b"]);
    let x = d(json!({"a":"x:y","b":"z"}), &spec).unwrap();
    let y = d(json!({"a":"x","b":"y:z"}), &spec).unwrap();
    assert_ne!(x.key, y.key);
}

/// Keys as they were made before numbers were read from their text: a
/// full parse into a `Value`, numbers shown by serde_json.
fn old_derive(text: &str, spec: &KeySpec) -> Result<NewItem, LineError> {
    fn scalar(v: &Value) -> Result<String, &'static str> {
        match v {
            Value::String(s) => Ok(s.clone()),
            Value::Number(n) => Ok(n.to_string()),
            Value::Bool(b) => Ok(b.to_string()),
            Value::Null => Err("null"),
            Value::Array(_) => Err("an array"),
            Value::Object(_) => Err("an object"),
        }
    }
    let value: Value = serde_json::from_str(text).unwrap();
    let Value::Object(obj) = value else {
        return key_error(KeyError::NotObject);
    };
    let (key, label) = match spec {
        KeySpec::Explicit => {
            let key = match obj.get("key") {
                None => return key_error(KeyError::NoKey),
                Some(Value::String(s)) => s.clone(),
                Some(Value::Number(n)) => n.to_string(),
                Some(_) => return key_error(KeyError::BadKey),
            };
            if key.is_empty() {
                return key_error(KeyError::BadKey);
            }
            let label = match obj.get("label") {
                Some(Value::String(s)) if !s.is_empty() => s.clone(),
                _ => key.clone(),
            };
            (key, label)
        }
        KeySpec::Fields(names) => {
            let mut parts = Vec::new();
            for name in names {
                let v = obj
                    .get(name)
                    .ok_or_else(|| KeyError::MissingField(name.clone()))?;
                let t = scalar(v).map_err(|k| KeyError::BadFieldType(name.clone(), k))?;
                parts.push(t.replace('\\', "\\\\").replace(':', "\\:"));
            }
            let canonical = parts.join(":");
            (hash_key(&canonical), canonical)
        }
    };
    Ok(NewItem {
        key,
        label,
        payload: text.trim().to_string(),
        ..NewItem::default()
    })
}

/// Every key that a 64-bit float held exactly is byte-identical to the
/// key made before (stores made then must not run their items again),
/// and bad JSON is named with its column, not a line.
#[test]
fn keys_that_were_exact_are_unchanged() {
    let specs = [KeySpec::Explicit, fields(&["site", "slug"])];
    let lines = [
        r#"{"key":"a","label":"A","x":[1,{"y":null}]}"#,
        r#"{"key":7}"#,
        r#"{"key":-7,"label":7}"#,
        r#"{"key":18446744073709551615}"#,
        r#"{"key":-9223372036854775808}"#,
        r#"{"key":1.5e3}"#,
        r#"{"key":1.0}"#,
        r#"{"key":1e0}"#,
        r#"{"key":2.50}"#,
        r#"{"key":0.1}"#,
        r#"{"key":-0}"#,
        r#"{"key":1E2}"#,
        r#"{"key":1e22}"#,
        r#"{"key":10000000000000000000000}"#,
        r#"{"key":5e-324}"#,
        r#"{"k\u0065y":"esc","label":""}"#,
        r#"{"site":"s:1","slug":true,"other":"x"}"#,
        r#"{"site":"s\\","slug":1.25,"other":"x"}"#,
        r#"{"site":42,"slug":18446744073709551615}"#,
        r#"{"site":"s","slug":null}"#,
        r#"{"site":"s","slug":[1]}"#,
        r#"{"site":"s"}"#,
        r#"  {"key":"padded"}  "#,
        r#"{ "key" : 12 , "site" : 3 , "slug" : 4 }"#,
        r#"[1,2]"#,
        r#""text""#,
        r#"42"#,
        r#"null"#,
        r#"{}"#,
    ];
    for spec in &specs {
        for line in lines {
            assert_eq!(
                derive_line(line, spec),
                old_derive(line, spec),
                "{line} with {spec:?}"
            );
        }
    }
    // Pinned pairs, whatever the code above says.
    let item = derive_line(r#"{"key":1.5e3}"#, &KeySpec::Explicit).unwrap();
    assert_eq!(
        (item.key.as_str(), item.label.as_str()),
        ("1500.0", "1500.0")
    );
    // A name twice was read as its last (see
    // `a_name_twice_in_one_object_is_refused_at_any_depth`).
    let item = derive_line(r#"{"site":"blog","slug":42}"#, &fields(&["site", "slug"]));
    let item = item.unwrap();
    assert_eq!(item.label, "blog:42");
    // `printf blog:42 | sha256sum`, first 32 hex digits.
    assert_eq!(item.key, "1a484691a5475b44c176e2c832ce5d57");
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

/// Numbers a 64-bit float cannot hold keep every digit: two different
/// numbers never share a key.
#[test]
fn numbers_beyond_a_float_keep_their_digits() {
    let key = |line: &str| derive_line(line, &KeySpec::Explicit).map(|i| i.key);
    for (line, want) in [
        (
            r#"{"key":12345678901234567890123}"#,
            "12345678901234567890123",
        ),
        (
            r#"{"key":12345678901234567890124}"#,
            "12345678901234567890124",
        ),
        (r#"{"key":18446744073709551616}"#, "18446744073709551616"),
        (r#"{"key":-9223372036854775809}"#, "-9223372036854775809"),
        (
            r#"{"key":0.1000000000000000000001}"#,
            "0.1000000000000000000001",
        ),
        (r#"{"key":1e-400}"#, "1e-400"),
        (
            r#"{"key":10000000000000000000001}"#,
            "10000000000000000000001",
        ),
    ] {
        assert_eq!(key(line).as_deref(), Ok(want), "{line}");
    }
    // Once rounded to 0.0, which is the key of a zero.
    assert_ne!(key(r#"{"key":1e-400}"#), key(r#"{"key":0.0}"#));
    let spec = fields(&["id"]);
    let a = derive_line(r#"{"id":170141183460469231731687303715884105727}"#, &spec).unwrap();
    let b = derive_line(r#"{"id":170141183460469231731687303715884105726}"#, &spec).unwrap();
    assert_eq!(a.label, "170141183460469231731687303715884105727");
    assert_ne!(a.key, b.key);
    assert_eq!(a.key, hash_key(&a.label));
    // A number serde_json cannot read back is refused, wherever it is.
    for line in [r#"{"key":1e400}"#, r#"{"key":"k","label":[1e400]}"#] {
        match derive_line(line, &KeySpec::Explicit) {
            Err(LineError::Json(msg)) => assert!(msg.contains("out of range"), "{msg}"),
            other => panic!("{line}: {other:?}"),
        }
    }
}

/// The key of a number denotes that number exactly: equal numbers
/// written alike share a key, different numbers never do.
#[test]
fn exact_decimals() {
    assert_eq!(decimal("1.50e2"), decimal("150"));
    assert_eq!(decimal("-0.0"), decimal("0e99999999999999999999999"));
    assert_eq!(decimal("1e+22"), decimal("10000000000000000000000"));
    assert_ne!(decimal("1e22"), decimal("1e23"));
    assert_ne!(decimal("-1"), decimal("1"));
    assert_eq!(decimal("1e99999999999999999999"), None);
    assert_eq!(decimal("123.4500"), Some((false, "12345".into(), -2)));
}

#[test]
fn a_bom_is_a_mark_only_at_the_start() {
    assert_eq!(without_bom(b"\xef\xbb\xbf{}"), b"{}");
    assert_eq!(without_bom(b"{}"), b"{}");
    assert_eq!(
        derive_line("\u{feff}{\"key\":\"a\"}", &KeySpec::Explicit),
        Err(LineError::Bom)
    );
}

#[test]
fn explicit_keys_and_errors() {
    let item = d(json!({"key": 42, "label": "answer"}), &KeySpec::Explicit).unwrap();
    assert_eq!((item.key.as_str(), item.label.as_str()), ("42", "answer"));
    assert_eq!(
        d(json!({"x":1}), &KeySpec::Explicit),
        key_error(KeyError::NoKey)
    );
    assert_eq!(
        d(json!({"key":""}), &KeySpec::Explicit),
        key_error(KeyError::BadKey)
    );
    assert_eq!(
        d(json!({"key":"a\u{1b}b"}), &KeySpec::Explicit),
        key_error(KeyError::ControlInKey)
    );
    assert_eq!(
        d(json!([1]), &KeySpec::Explicit),
        key_error(KeyError::NotObject)
    );
    assert_eq!(
        d(json!({"site":"a"}), &fields(&["site", "slug"])),
        key_error(KeyError::MissingField("slug".into()))
    );
    assert_eq!(
        d(json!({"site":null}), &fields(&["site"])),
        key_error(KeyError::BadFieldType("site".into(), "null"))
    );
}

/// A number no reader could parse back (`1e999`) in a field the key does
/// not read was accepted, and every JSON view then showed the payload as
/// a string. Refused wherever it lies; a large number in range, and
/// exponent-like text in a string, are kept.
#[test]
fn a_number_out_of_range_anywhere_is_refused() {
    let long = format!(r#"{{"key":"a","n":{}}}"#, "9".repeat(309));
    for line in [
        r#"{"key":"a","x":1e999}"#,
        r#"{"key":"a","deep":[{"x":-2E+400}]}"#,
        long.as_str(),
    ] {
        match derive_line(line, &KeySpec::Explicit) {
            Err(LineError::Json(msg)) => assert!(msg.contains("out of range"), "{line}: {msg}"),
            other => panic!("{line}: {other:?}"),
        }
    }
    for line in [
        r#"{"key":"a","x":1e308,"y":2.5E-999,"z":1.0e+10}"#,
        r#"{"key":"a","note":"3e999 is text"}"#,
    ] {
        let item = derive_line(line, &KeySpec::Explicit).unwrap();
        assert!(
            serde_json::from_str::<Value>(&item.payload).is_ok(),
            "{line}"
        );
    }
}

/// A key of blank space was accepted and then shown as nothing in every
/// list; one with words and spaces is a key like any other.
#[test]
fn a_blank_key_is_refused() {
    for line in [r#"{"key":"   "}"#, r#"{"key":"\u3000"}"#] {
        assert_eq!(
            derive_line(line, &KeySpec::Explicit),
            key_error(KeyError::BlankKey),
            "{line}"
        );
    }
    assert_eq!(
        derive_line(r#"{"key":" a b "}"#, &KeySpec::Explicit)
            .unwrap()
            .key,
        " a b "
    );
}

/// A NUL in a label (given, or joined from key fields) is kept as the
/// `\x00` every view shows, so both stores keep it (PostgreSQL refused the
/// whole add); the key is made from the text as given.
#[test]
fn a_nul_in_a_label_is_kept_as_its_escape() {
    let item = d(
        json!({"key": "k1", "label": "la\u{0}bel"}),
        &KeySpec::Explicit,
    )
    .unwrap();
    assert_eq!(item.label, "la\\x00bel");
    let spec = fields(&["site", "slug"]);
    let with_nul = d(json!({"site": "ブログ", "slug": "記事\u{0}一"}), &spec).unwrap();
    assert_eq!(with_nul.label, "ブログ:記事\\x00一");
    let escaped = d(json!({"site": "ブログ", "slug": "記事\\x00一"}), &spec).unwrap();
    assert_ne!(with_nul.key, escaped.key, "the key is of the text as given");
}

/// A name twice in one object is refused at any depth, however many names
/// the object has (a list, then a set, keeps them) and however the name
/// is spelled; the same name in two objects, or inside its own value, is
/// no repeat.
#[test]
fn a_name_twice_in_one_object_is_refused_at_any_depth() {
    let many: String = (0..40).map(|i| format!(",\"f{i}\":{i}")).collect();
    for line in [
        r#"{"key":"a","key":"b"}"#.to_string(),
        r#"{"key":"a","n":{"x":1,"x":2}}"#.to_string(),
        r#"{"key":"a","n":[{"x":1},{"y":[{"z":1,"z":1}]}]}"#.to_string(),
        r#"{"k\u0065y":"a","key":"b"}"#.to_string(),
        format!("{{\"key\":\"a\"{many},\"f33\":0}}"),
        format!("{{\"key\":\"a\",\"n\":{{\"f3\":0{many}}}}}"),
    ] {
        match derive_line(&line, &KeySpec::Explicit) {
            Err(LineError::NameTwice(msg)) => {
                assert!(
                    msg.contains("is given twice in one object at column"),
                    "{msg}"
                );
            }
            other => panic!("{line}: {other:?}"),
        }
    }
    for line in [
        r#"{"key":"a","n":[{"x":1},{"x":2}]}"#.to_string(),
        r#"{"key":"a","key2":{"key":{"key":1}}}"#.to_string(),
        format!("{{\"key\":\"a\"{many}}}"),
    ] {
        assert!(derive_line(&line, &KeySpec::Explicit).is_ok(), "{line}");
    }
    assert!(matches!(
        derive_line(r#"{"s":1,"t":2,"s":3}"#, &fields(&["s", "t"])),
        Err(LineError::NameTwice(_))
    ));
}

/// A key typed in either Unicode form is looked for in both, the form
/// typed first; ASCII and composed kana are looked for once.
#[test]
fn a_typed_key_is_looked_for_as_typed_composed_and_decomposed() {
    let (nfc, nfd) = ("ズッド", "ス\u{3099}ット\u{3099}");
    assert_eq!(stored_forms(nfc), [nfc, nfd]);
    assert_eq!(stored_forms(nfd), [nfd, nfc]);
    assert_eq!(stored_forms("k1"), ["k1"]);
    assert_eq!(stored_forms("記事"), ["記事"]);
}

/// The spec a batch records reads back as itself; the order of the
/// fields is part of it (the join is ordered: other keys).
#[test]
fn a_key_spec_is_recorded_in_order() {
    let fields = |f: &[&str]| KeySpec::Fields(f.iter().map(|s| (*s).to_string()).collect());
    for spec in [
        KeySpec::Explicit,
        fields(&["site", "slug"]),
        fields(&["key"]),
    ] {
        assert_eq!(KeySpec::from_stored(&spec.stored()), Some(spec.clone()));
    }
    assert_ne!(
        fields(&["slug", "site"]).stored(),
        fields(&["site", "slug"]).stored()
    );
    assert_ne!(KeySpec::Explicit.stored(), fields(&["key"]).stored());
    let line = |f: &[&str]| {
        derive_line(r#"{"site":"a","slug":"b"}"#, &fields(f))
            .unwrap()
            .key
    };
    assert_ne!(line(&["slug", "site"]), line(&["site", "slug"]));
}
