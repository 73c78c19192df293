use super::*;

fn want(host: &str, port: &str, dbname: &str, user: &str) -> Wanted {
    Wanted {
        hosts: vec![host.to_string()],
        port: port.to_string(),
        dbname: dbname.to_string(),
        user: user.to_string(),
    }
}

fn found(text: &str, w: &Wanted) -> Option<String> {
    find(text.as_bytes(), w).map(|p| String::from_utf8(p).unwrap())
}

/// The wanted keys of a URL, the OS user being `me`.
fn wanted_of(url: &str) -> Vec<Wanted> {
    wanted(&url.parse().unwrap(), || Some("me".to_string()))
}

#[test]
fn escapes_stand_for_colon_and_backslash() {
    let text = r"h\:x:5432:d\\b:u:p\:w\\d:ignored";
    assert_eq!(
        found(text, &want("h:x", "5432", r"d\b", "u")).as_deref(),
        Some(r"p:w\d")
    );
    assert_eq!(found(text, &want("h", "x", r"d\b", "u")), None);
    // A `\` ending the line stands for itself.
    assert_eq!(
        found(r"h:1:d:u:pw\", &want("h", "1", "d", "u")).as_deref(),
        Some(r"pw\")
    );
}

#[test]
fn a_star_matches_anything_and_an_escaped_star_only_a_star() {
    let w = want("db.example", "6432", "queue", "app");
    assert_eq!(found("*:*:*:*:any", &w).as_deref(), Some("any"));
    assert_eq!(
        found("db.example:*:queue:*:some", &w).as_deref(),
        Some("some")
    );
    assert_eq!(found(r"\*:*:*:*:literal", &w), None);
    assert_eq!(
        found(r"\*:*:*:*:literal", &want("*", "1", "d", "u")).as_deref(),
        Some("literal")
    );
    // A star among other characters is no wildcard.
    assert_eq!(found("db.*:*:*:*:glob", &w), None);
}

#[test]
fn comments_blank_and_short_lines_are_skipped_and_the_first_match_wins() {
    let w = want("h", "5432", "d", "u");
    let text = "# h:5432:d:u:commented\n\
                \n\
                h:5432:d:u\n\
                other:5432:d:u:other\r\n\
                h:5432:d:u:first\r\n\
                *:*:*:*:second\n";
    assert_eq!(found(text, &w).as_deref(), Some("first"));
    // More specific lines go first: a wildcard before them wins.
    assert_eq!(
        found("*:*:*:*:wild\nh:5432:d:u:exact", &w).as_deref(),
        Some("wild")
    );
    // The first matching line gives no password: the search ends there.
    assert_eq!(found("h:5432:d:u:\n*:*:*:*:later", &w).as_deref(), Some(""));
    // The user, database and port must match too.
    assert_eq!(found("h:5432:d:v:x\nh:5433:d:u:y\nh:5432:e:u:z", &w), None);
}

#[test]
fn a_socket_in_a_default_directory_is_localhost_and_one_elsewhere_its_directory() {
    let [default] = &wanted_of("postgres://u@/queue?host=/var/run/postgresql")[..] else {
        panic!()
    };
    assert_eq!(default.hosts, ["/var/run/postgresql", "localhost"]);
    assert_eq!(
        found("localhost:5432:queue:u:local", default).as_deref(),
        Some("local")
    );
    assert_eq!(
        found("/var/run/postgresql:5432:queue:u:dir", default).as_deref(),
        Some("dir")
    );
    let [private] = &wanted_of("postgres://pwuser@/nsdb?host=/tmp/sock&port=55499")[..] else {
        panic!()
    };
    assert_eq!(*private, {
        let mut w = want("/tmp/sock", "55499", "nsdb", "pwuser");
        w.hosts = vec!["/tmp/sock".into()];
        w
    });
    assert_eq!(found("localhost:55499:nsdb:pwuser:local", private), None);
    assert_eq!(
        found("/tmp/sock:55499:nsdb:pwuser:sock", private).as_deref(),
        Some("sock")
    );
}

#[test]
fn defaults_are_the_drivers_user_the_user_as_database_and_port_5432() {
    assert_eq!(
        wanted_of("postgres://db.example"),
        [want("db.example", "5432", "me", "me")]
    );
    assert_eq!(
        wanted_of("postgres://app@db.example/queue"),
        [want("db.example", "5432", "queue", "app")]
    );
    assert_eq!(
        wanted_of("postgres://u@a:1,b/q"),
        [want("a", "1", "q", "u"), want("b", "5432", "q", "u")]
    );
    assert_eq!(
        wanted_of("postgres://u@/q?hostaddr=127.0.0.1"),
        [want("127.0.0.1", "5432", "q", "u")]
    );
    // No user known: nothing to look up.
    assert_eq!(wanted(&"postgres://h/q".parse().unwrap(), || None), []);
}

#[test]
fn a_file_others_may_read_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pgpass");
    std::fs::write(&path, "*:*:*:*:s3cret\n").unwrap();
    let chmod = |mode| std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode));
    chmod(0o600).unwrap();
    assert_eq!(
        read_private(&path).unwrap().as_deref(),
        Some(&b"*:*:*:*:s3cret\n"[..])
    );
    chmod(0o400).unwrap();
    assert!(read_private(&path).unwrap().is_some());
    for open in [0o640, 0o604, 0o660, 0o610] {
        chmod(open).unwrap();
        let err = read_private(&path).unwrap_err();
        assert!(matches!(err, Ignored::Readable(_)), "{open:o}: {err:?}");
        // The warning names the file, never its content.
        let said = err.to_string();
        assert!(
            said.contains(&path.display().to_string()) && !said.contains("s3cret"),
            "{said}"
        );
    }
    assert!(matches!(
        read_private(dir.path()),
        Err(Ignored::NotAFile(_))
    ));
    assert!(read_private(&dir.path().join("absent")).unwrap().is_none());
}

#[test]
fn a_password_in_the_url_is_kept() {
    let mut config: Config = "postgres://u:given@h/q".parse().unwrap();
    supply_password(&mut config);
    assert_eq!(config.get_password(), Some(&b"given"[..]));
}
