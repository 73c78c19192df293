//! The items search finds an item by what the screen shows of it. A
//! label's halfwidth katakana with a sound mark (`ｶﾞ`, `ﾌﾞ`) are drawn in
//! their fullwidth form (`ガ`, `ブ`, see `text::drawable`): searching for
//! what was on screen did not find it, and the search box showed a
//! halfwidth `ﾌﾞ` typed as `ブ` while it looked for the other.

use crate::support::pty;

use std::path::Path;

use pty::Dash;

const BIN: &str = env!("CARGO_BIN_EXE_nightshift");

both_backends! {
    fn the_search_finds_a_label_by_its_drawn_form(env) {
        let lines = [
            r#"{"key":"k1","label":"ｶﾞｲﾄﾞﾌﾞｯｸ 第1版"}"#,
            r#"{"key":"k2","label":"ガイドブック 第2版"}"#,
            r#"{"key":"k3","label":"ﾊﾟﾝ屋"}"#,
            r#"{"key":"k4","label":"カイトの本"}"#,
        ];
        let file = env.write("items.jsonl", &format!("{}\n", lines.join("\n")));
        env.cmd().args(["add", "b"]).arg(file).assert().success();
        let mut dash = Dash::open(Path::new(BIN), env.dir.path(), &env.db, &[], (80, 24));
        dash.wait_loaded();
        dash.key("3");
        dash.wait_text(" · 1 of 4");
        // Typed as the screen shows it (`ｶﾞｲﾄﾞﾌﾞｯｸ` is drawn `ガｲドブｯｸ`):
        // both editions, not the kite.
        dash.key("/");
        dash.type_text("ブ");
        let screen = dash.wait_for("both guides", |s| s.contains("search: \"ブ\" · 1 of 2"));
        assert!(screen.contains("ガｲドブｯｸ 第1版"), "{screen}");
        assert!(screen.contains("ガイドブック 第2版"), "{screen}");
        assert!(!screen.contains("カイトの本"), "{screen}");
        // Typed in halfwidth, shown in fullwidth: the same two.
        dash.key("\x1b");
        dash.key("/");
        dash.type_text("ﾌﾞ");
        dash.wait_for("both guides", |s| s.contains("search: \"ブ\" · 1 of 2"));
        dash.key("\x1b");
        dash.key("/");
        dash.type_text("パ");
        let screen = dash.wait_for("the bakery", |s| s.contains("search: \"パ\" · 1 of 1"));
        assert!(screen.contains("パﾝ屋"), "{screen}");
        dash.key("\r");
        dash.key("q");
        dash.wait_exit();
    }
}
