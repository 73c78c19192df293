//! Marks: kept by key across polls, and the writes that act on the
//! marked set.

use super::*;

/// Marks (space) are kept by key across polls and scrolling; `R` then
/// asks to requeue the marked failed ones and `x` to skip the marked,
/// naming the exact count; a confirmed write clears them, another batch
/// too.
#[test]
fn marks_survive_a_poll_and_r_and_x_act_on_the_marked_set() {
    let mut app = app();
    step(&mut app, Intent::GoPane(Pane::Items));
    // k0 (failed), k1 (pending), k3 (failed).
    step(&mut app, Intent::ToggleMark);
    step(&mut app, Intent::Down);
    step(&mut app, Intent::ToggleMark);
    step(&mut app, Intent::Down);
    step(&mut app, Intent::Down);
    step(&mut app, Intent::ToggleMark);
    // k2 toggled twice: not marked.
    step(&mut app, Intent::Up);
    step(&mut app, Intent::ToggleMark);
    step(&mut app, Intent::ToggleMark);
    let marked: Vec<&str> = app.marks.keys().map(String::as_str).collect();
    assert_eq!(marked, ["k0", "k1", "k3"]);
    // A poll (and scrolling far away) keeps them.
    for _ in 0..30 {
        step(&mut app, Intent::Down);
    }
    poll(&mut app, false);
    assert_eq!(app.marks.len(), 3);

    assert!(step(&mut app, Intent::RequeueSelected).is_empty());
    assert_eq!(app.mode, Mode::Confirm);
    let asked = app.confirm.clone().unwrap();
    assert_eq!(
        asked.question(),
        "Requeue 2 failed items: 2 of the 3 marked (1 not failed, left alone)?"
    );
    assert!(step(&mut app, Intent::Confirm(false)).is_empty());
    assert_eq!(app.marks.len(), 3, "a no keeps the marks");

    assert!(step(&mut app, Intent::SkipSelected).is_empty());
    let skip = app.confirm.clone().unwrap();
    assert_eq!(
        skip,
        Write::SkipMarked {
            batch: "a".into(),
            keys: vec!["k0".into(), "k1".into(), "k3".into()],
            done: 0
        }
    );
    assert_eq!(
        skip.question(),
        "Mark 3 marked items of a skipped (done without running)?"
    );
    assert_eq!(
        step(&mut app, Intent::Confirm(true)),
        vec![Effect::Write(skip)]
    );
    assert!(app.marks.is_empty(), "acted on: cleared");

    // Without marks, R is about the selected row again.
    step(&mut app, Intent::Top);
    let effects = step(&mut app, Intent::RequeueSelected);
    assert!(
        matches!(&effects[..], [Effect::Write(Write::Requeue { keys, .. })] if keys == &["k0"])
    );
    step(&mut app, Intent::ToggleMark);
    step(&mut app, Intent::NextBatch);
    assert!(app.marks.is_empty(), "another batch clears the marks");
}

/// Marks in the dead letters' item list, and none when read-only.
#[test]
fn marks_work_in_a_class_list_and_are_refused_read_only() {
    let mut app = app();
    step(&mut app, Intent::GoPane(Pane::DeadLetters));
    step(&mut app, Intent::Open);
    poll(&mut app, false);
    step(&mut app, Intent::ToggleMark);
    assert_eq!(app.marks.len(), 1);
    let mut ro = app_with(true, false);
    step(&mut ro, Intent::GoPane(Pane::Items));
    step(&mut ro, Intent::ToggleMark);
    assert!(ro.marks.is_empty());
    assert!(ro.flash.as_ref().unwrap().text.starts_with("read-only"));
}

/// `c` with marks asks to cancel the marked items not done, naming the
/// count, and a yes cancels exactly those and clears the marks.
#[test]
fn c_with_marks_cancels_the_marked_set() {
    let mut app = app();
    step(&mut app, Intent::GoPane(Pane::Items));
    step(&mut app, Intent::ToggleMark);
    step(&mut app, Intent::Down);
    step(&mut app, Intent::ToggleMark);
    assert!(step(&mut app, Intent::CancelSelected).is_empty());
    let asked = app.confirm.clone().unwrap();
    assert_eq!(
        asked,
        Write::CancelMarked {
            batch: "a".into(),
            keys: vec!["k0".into(), "k1".into()],
            left: 0
        }
    );
    assert!(
        asked.question().starts_with("Cancel 2 marked items of a?"),
        "{}",
        asked.question()
    );
    assert_eq!(
        step(&mut app, Intent::Confirm(true)),
        vec![Effect::Write(asked)]
    );
    assert!(app.marks.is_empty(), "acted on: cleared");
}

/// Marked items a cancel would send where they are already (quarantined,
/// done) are left out and said so, where the question counted them as
/// going to manual; a set of only those is refused with why.
#[test]
fn c_with_marks_leaves_out_the_quarantined_ones() {
    let mut app = app();
    step(&mut app, Intent::GoPane(Pane::Items));
    // k0 failed, k1 pending.
    step(&mut app, Intent::ToggleMark);
    step(&mut app, Intent::Down);
    step(&mut app, Intent::ToggleMark);
    // k0 as a poll finds it quarantined (no poll in between here).
    app.marks.get_mut("k0").unwrap().tier = Some(Tier::Manual);
    assert!(app.update(Intent::CancelSelected).is_empty());
    let asked = app.confirm.clone().unwrap();
    assert_eq!(
        asked,
        Write::CancelMarked {
            batch: "a".into(),
            keys: vec!["k1".into()],
            left: 1
        }
    );
    assert!(
        asked
            .question()
            .ends_with(" 1 more marked is done or failed/manual already and stays."),
        "{}",
        asked.question()
    );
    app.update(Intent::Confirm(false));
    app.marks.remove("k1");
    assert!(app.update(Intent::CancelSelected).is_empty());
    assert_eq!(app.confirm, None);
    assert_eq!(
        app.flash.as_ref().unwrap().text,
        "the marked item is done or failed/manual already: nothing to cancel"
    );
}
