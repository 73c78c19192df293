//! A role that needs a password and a URL that gives none: the password
//! comes from `PGPASSWORD`, else the password file (`PGPASSFILE`, else
//! `~/.pgpass`), as psql finds it; a file others may read is passed over.

use crate::support as common;

use common::{Backend, Env};

/// The file's password, with the `:` and `\` a line must escape.
const PASSWORD: &str = r"fi:le\secret";

#[test]
fn a_url_without_a_password_takes_it_from_pgpassword_or_the_password_file() {
    let Some(env) = Env::for_backend(Backend::Pg) else {
        return;
    };
    let url = env.db.to_str().unwrap().to_string();
    let database = url.split('/').nth(3).unwrap().split('?').next().unwrap();
    let socket_dir = url
        .split("host=")
        .nth(1)
        .unwrap()
        .split('&')
        .next()
        .unwrap();
    let role = format!("pw_{database}");
    let mut admin = env.pg_sql();
    admin
        .batch_execute(&format!(
            "CREATE ROLE {role} LOGIN PASSWORD '{PASSWORD}';
             GRANT CONNECT ON DATABASE {database} TO {role};
             GRANT USAGE ON SCHEMA nightshift TO {role};
             GRANT SELECT ON ALL TABLES IN SCHEMA nightshift TO {role};"
        ))
        .unwrap();
    // The test server trusts its socket: this role alone must give a
    // password (the first matching pg_hba line wins).
    let hba_file: String = admin.query_one("SHOW hba_file", &[]).unwrap().get(0);
    let hba = std::fs::read_to_string(&hba_file).unwrap();
    std::fs::write(&hba_file, format!("local all {role} scram-sha-256\n{hba}")).unwrap();
    admin.execute("SELECT pg_reload_conf()", &[]).unwrap();
    let role_url = url.replace("user=postgres", &format!("user={role}"));
    common::wait_for("the server to ask the role for a password", || {
        postgres::Client::connect(&role_url, postgres::NoTls).is_err()
    });
    env.add_items("b", 2);

    let status = |envs: &[(&str, &str)]| {
        let mut cmd = env.cmd();
        cmd.env("NIGHTSHIFT_DB", &role_url)
            .env("HOME", env.path("home"))
            .env_remove("PGPASSWORD")
            .env_remove("PGPASSFILE")
            .args(["status", "--short"]);
        for (k, v) in envs {
            cmd.env(k, v);
        }
        let out = common::ran(cmd.output().unwrap());
        assert!(
            !out.stdout.contains("secret") && !out.stderr.contains("secret"),
            "{out:#?}"
        );
        out
    };
    let connects = |out: common::Ran| {
        assert_eq!(out.code(0).stdout.trim(), "b 0✓ 2…", "{}", out.stderr);
    };

    let none = status(&[]);
    assert_eq!(none.code, 3, "{none:#?}");
    assert!(none.stderr.contains("password missing"), "{}", none.stderr);

    let file = env.write(
        "pgpass",
        &format!(
            "# host:port:database:user:password\n\
             {socket_dir}:5432:{database}:postgres:not-this-one\n\
             localhost:5432:{database}:{role}:not-a-default-socket\n\
             {socket_dir}:*:{database}:{role}:{}\n\
             *:*:*:*:too-late\n",
            PASSWORD.replace('\\', r"\\").replace(':', r"\:")
        ),
    );
    let chmod = |mode| {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    chmod(0o600);
    let file = file.to_str().unwrap();
    connects(status(&[("PGPASSFILE", file)]));

    // ~/.pgpass when PGPASSFILE is not set.
    std::fs::create_dir(env.path("home")).unwrap();
    std::fs::copy(file, env.path("home/.pgpass")).unwrap();
    connects(status(&[]));

    // PGPASSWORD goes before the file.
    connects(status(&[
        ("PGPASSWORD", PASSWORD),
        ("PGPASSFILE", "/nonexistent"),
    ]));
    let wrong = status(&[("PGPASSWORD", "wrong"), ("PGPASSFILE", file)]);
    assert_eq!(wrong.code, 3, "{wrong:#?}");
    assert!(
        wrong.stderr.contains("password authentication failed"),
        "{}",
        wrong.stderr
    );

    // A file the group may read is ignored, and the warning names it.
    chmod(0o640);
    let open = status(&[("PGPASSFILE", file)]);
    assert_eq!(open.code, 3, "{open:#?}");
    assert!(
        open.stderr.contains(&format!(
            "warning: password file {file} has group or world access"
        )) && open.stderr.contains("password missing"),
        "{}",
        open.stderr
    );
}
