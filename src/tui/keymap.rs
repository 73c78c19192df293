//! Keys, per mode, in one table: the event loop dispatches through it and
//! the footer hints and the `?` overlay are generated from it, so what the
//! help says is what the keys do.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::action::{Elsewhere, Intent, Pane};

/// What the keyboard is doing right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Normal,
    /// Typing a search (items) or kinds (run log).
    Filter,
    /// Typing an answer (the pause reason).
    Prompt,
    /// A yes/no question about a write; No is the default.
    Confirm,
    Help,
    /// The "since you last looked" summary.
    Notice,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    pub code: KeyCode,
    pub ctrl: bool,
}

impl Key {
    fn matches(&self, ev: &KeyEvent) -> bool {
        let ctrl = ev.modifiers.contains(KeyModifiers::CONTROL);
        // Shift is part of the character ('R', '?'), so it is not compared.
        self.code == ev.code && self.ctrl == ctrl
    }

    /// How the help and footer write the key.
    pub fn label(&self) -> String {
        let base = match self.code {
            KeyCode::Char(' ') => "Space".to_string(),
            KeyCode::Char(c) => c.to_string(),
            KeyCode::Enter => "Enter".into(),
            KeyCode::Esc => "Esc".into(),
            KeyCode::Tab => "Tab".into(),
            KeyCode::BackTab => "Shift-Tab".into(),
            KeyCode::Up => "↑".into(),
            KeyCode::Down => "↓".into(),
            KeyCode::PageUp => "PgUp".into(),
            KeyCode::PageDown => "PgDn".into(),
            KeyCode::Home => "Home".into(),
            KeyCode::End => "End".into(),
            KeyCode::Backspace => "Backspace".into(),
            other => format!("{other:?}"),
        };
        if self.ctrl {
            format!("Ctrl-{base}")
        } else {
            base
        }
    }
}

const fn ch(c: char) -> Key {
    Key {
        code: KeyCode::Char(c),
        ctrl: false,
    }
}

const fn code(code: KeyCode) -> Key {
    Key { code, ctrl: false }
}

const fn ctrl(c: char) -> Key {
    Key {
        code: KeyCode::Char(c),
        ctrl: true,
    }
}

/// Where the keys are pressed: a pane, and whether an item's detail is
/// open over its list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct At {
    pub pane: Pane,
    pub detail: bool,
}

impl From<Pane> for At {
    fn from(pane: Pane) -> At {
        At {
            pane,
            detail: false,
        }
    }
}

pub struct Binding {
    pub mode: Mode,
    pub keys: &'static [Key],
    pub intent: Intent,
    /// Panes where it applies; empty: everywhere.
    pub panes: &'static [Pane],
    /// Its words: how the footer, the help and every message name the key
    /// (`A (requeue all)`), so a key is named one way everywhere.
    pub name: &'static str,
    /// What the help says after its words; empty: nothing more.
    pub help: &'static str,
    /// Offered in the footer (else only in the help overlay).
    pub footer: bool,
    /// Changes the store (refused read-only).
    pub writes: bool,
    /// Acts on the pane's list (its filter, its follow): not while an
    /// item's detail covers the list.
    pub lists: bool,
}

const fn bind(
    mode: Mode,
    keys: &'static [Key],
    intent: Intent,
    name: &'static str,
    help: &'static str,
) -> Binding {
    Binding {
        mode,
        keys,
        intent,
        panes: &[],
        name,
        help,
        footer: false,
        writes: false,
        lists: false,
    }
}

const fn only(mut b: Binding, panes: &'static [Pane]) -> Binding {
    b.panes = panes;
    b
}

const fn writes(mut b: Binding) -> Binding {
    b.writes = true;
    b
}

const fn list(mut b: Binding) -> Binding {
    b.lists = true;
    b
}

/// Offered in the footer.
const fn shown(mut b: Binding) -> Binding {
    b.footer = true;
    b
}

use Mode::{Confirm, Filter, Help, Normal, Notice, Prompt};

const LISTS: &[Pane] = &[Pane::Items, Pane::DeadLetters];
/// Where Enter opens something: a batch's items, an item, a class, an
/// event's item.
const OPENS: &[Pane] = &[Pane::Batches, Pane::Items, Pane::DeadLetters, Pane::Log];
const QUIT: &[Key] = &[ch('q'), ctrl('c')];
const CTRL_C: &[Key] = &[ctrl('c')];

#[rustfmt::skip]
pub const BINDINGS: &[Binding] = &[
    shown(bind(Normal, QUIT, Intent::Quit, "quit", "")),
    shown(bind(Normal, &[ch('?')], Intent::Help, "help", "this list of keys")),
    shown(bind(Normal, &[code(KeyCode::Tab)], Intent::NextPane, "pane", "the next one")),
    bind(Normal, &[code(KeyCode::BackTab)], Intent::PrevPane, "pane back", "the one before"),
    bind(Normal, &[ch('1')], Intent::GoPane(Pane::Batches), "pane 1", "batches"),
    bind(Normal, &[ch('2')], Intent::GoPane(Pane::Activity), "pane 2", "activity"),
    bind(Normal, &[ch('3')], Intent::GoPane(Pane::Items), "pane 3", "items"),
    bind(Normal, &[ch('4')], Intent::GoPane(Pane::DeadLetters), "pane 4", "dead letters"),
    bind(Normal, &[ch('5')], Intent::GoPane(Pane::Log), "pane 5", "run log"),
    bind(Normal, &[ch('6')], Intent::GoPane(Pane::Pools), "pane 6", "limit pools"),
    bind(Normal, &[ch('j'), code(KeyCode::Down)], Intent::Down, "down", ""),
    bind(Normal, &[ch('k'), code(KeyCode::Up)], Intent::Up, "up", ""),
    bind(Normal, &[code(KeyCode::PageDown), ctrl('d')], Intent::PageDown, "page down", ""),
    bind(Normal, &[code(KeyCode::PageUp), ctrl('u')], Intent::PageUp, "page up", ""),
    bind(Normal, &[ch('g'), code(KeyCode::Home)], Intent::Top, "first", ""),
    bind(Normal, &[ch('G'), code(KeyCode::End)], Intent::Bottom, "last", ""),
    bind(Normal, &[ch(']')], Intent::NextBatch, "next batch", ""),
    bind(Normal, &[ch('[')], Intent::PrevBatch, "previous batch", ""),
    shown(list(only(bind(Normal, &[code(KeyCode::Enter)], Intent::Open, "open", "item detail, class items"), OPENS))),
    bind(Normal, &[code(KeyCode::Esc)], Intent::Back, "back", "close what is open, else clear the filter"),
    shown(list(only(bind(Normal, &[ch('/')], Intent::StartFilter, "filter", "search key/label, or log kinds"), &[Pane::Items, Pane::Log]))),
    shown(list(only(bind(Normal, &[ch('s')], Intent::CycleStatus, "status", "cycle the filter (all, pending, claimed, done, empty, skipped, failed)"), &[Pane::Items]))),
    list(only(bind(Normal, &[ch('S')], Intent::CycleStatusBack, "status back", "cycle the filter the other way (all, then failed)"), &[Pane::Items])),
    shown(list(only(bind(Normal, &[ch('f')], Intent::ToggleFollow, "follow", "new events on/off"), &[Pane::Log]))),
    shown(list(only(bind(Normal, &[ch('b')], Intent::ToggleLogBatch, "batch", "the run log of this batch / all batches"), &[Pane::Log]))),
    shown(writes(bind(Normal, &[ch('r')], Intent::Resume, "run", "start a run (resume) of the batch"))),
    shown(writes(bind(Normal, &[ch('p')], Intent::TogglePause, "pause", "the batch (asks why), or unpause it"))),
    writes(only(bind(Normal, &[ch(' ')], Intent::ToggleMark, "mark", "mark or unmark the item; requeue, skip and cancel then act on the marked"), LISTS)),
    shown(writes(only(bind(Normal, &[ch('R')], Intent::RequeueSelected, "requeue", "the selected failed item (or the marked)"), LISTS))),
    shown(writes(only(bind(Normal, &[ch('A')], Intent::RequeueAll, "requeue all", "every failed item shown (asks)"), LISTS))),
    shown(writes(only(bind(Normal, &[ch('x')], Intent::SkipSelected, "skip", "mark the selected item skipped, or the marked (asks)"), LISTS))),
    shown(writes(only(bind(Normal, &[ch('c')], Intent::CancelSelected, "cancel", "the selected item or the marked, its worker stopped, to manual (asks)"), LISTS))),
    writes(bind(Normal, &[ch('X')], Intent::StopRuns, "stop", "the batch's runs gracefully, on any host (asks)")),
    // Filter and Prompt: typed characters become Intent::Input.
    shown(bind(Filter, &[code(KeyCode::Enter)], Intent::Submit, "keep", "keep the filter")),
    shown(bind(Filter, &[code(KeyCode::Esc)], Intent::Cancel, "clear", "clear the filter")),
    bind(Filter, &[code(KeyCode::Backspace)], Intent::Backspace, "delete", "a character"),
    bind(Filter, CTRL_C, Intent::Quit, "quit", ""),
    shown(bind(Prompt, &[code(KeyCode::Enter)], Intent::Submit, "submit", "")),
    shown(bind(Prompt, &[code(KeyCode::Esc)], Intent::Cancel, "cancel", "")),
    bind(Prompt, &[code(KeyCode::Backspace)], Intent::Backspace, "delete", "a character"),
    bind(Prompt, CTRL_C, Intent::Quit, "quit", ""),
    shown(bind(Confirm, &[ch('y'), ch('Y')], Intent::Confirm(true), "yes", "do it")),
    shown(bind(Confirm, &[ch('n'), ch('N'), code(KeyCode::Enter), code(KeyCode::Esc)], Intent::Confirm(false), "no", "the default")),
    bind(Confirm, CTRL_C, Intent::Quit, "quit", ""),
    shown(bind(Help, &[ch('j'), code(KeyCode::Down)], Intent::Down, "scroll down", "")),
    shown(bind(Help, &[ch('k'), code(KeyCode::Up)], Intent::Up, "scroll up", "")),
    shown(bind(Help, &[code(KeyCode::Esc), ch('?'), code(KeyCode::Enter)], Intent::Back, "close", "close the help")),
    bind(Help, QUIT, Intent::Quit, "quit", ""),
    shown(bind(Notice, &[code(KeyCode::Esc), code(KeyCode::Enter), ch(' ')], Intent::Back, "dismiss", "")),
    bind(Notice, QUIT, Intent::Quit, "quit", ""),
];

impl Binding {
    fn in_pane(&self, pane: Pane) -> bool {
        self.panes.is_empty() || self.panes.contains(&pane)
    }

    /// How a message names it: `A (requeue all)`.
    pub fn named(&self) -> String {
        named(&keys_label(self), self.name)
    }

    /// How the footer and a title offer it: `A requeue all`.
    pub fn offered(&self) -> String {
        format!("{} {}", keys_label(self), self.name)
    }

    /// How the help describes it: its words, then what more it says.
    pub fn described(&self) -> String {
        if self.help.is_empty() {
            self.name.to_string()
        } else {
            format!("{}: {}", self.name, self.help)
        }
    }
}

/// How a message names a key: `A (requeue all)`, the key as the help
/// writes it, then its words.
pub fn named(key: &str, name: &str) -> String {
    format!("{key} ({name})")
}

/// What a write key says read-only, wherever it is pressed.
pub fn disabled(key: &str, name: &str) -> String {
    format!("read-only: {} is disabled", named(key, name))
}

/// The binding of an intent in a mode (its first, in table order).
pub fn binding_of(mode: Mode, intent: &Intent) -> Option<&'static Binding> {
    BINDINGS
        .iter()
        .find(|b| b.mode == mode && b.intent == *intent)
}

/// How a message names the key of an intent in a mode: `p (pause)`.
pub fn key_of(mode: Mode, intent: &Intent) -> String {
    binding_of(mode, intent).map_or_else(String::new, Binding::named)
}

/// How a title or a hint offers the key of an intent: `Esc back`.
pub fn offer(mode: Mode, intent: &Intent) -> String {
    binding_of(mode, intent).map_or_else(String::new, Binding::offered)
}

/// The footer's offer of a mode's keys, as one line: `y yes · n/N/… no`.
pub fn offers(mode: Mode, at: impl Into<At>) -> String {
    bindings(mode, at)
        .filter(|b| b.footer)
        .map(Binding::offered)
        .collect::<Vec<_>>()
        .join(" · ")
}

fn applies(b: &Binding, mode: Mode, at: At) -> bool {
    b.mode == mode && b.in_pane(at.pane) && !(at.detail && b.lists)
}

/// The intent a key stands for in this mode and place; a key of this
/// mode bound only in other panes (or for the list an open item covers)
/// stands for saying where it works.
pub fn lookup(mode: Mode, at: impl Into<At>, ev: &KeyEvent) -> Option<Intent> {
    let at = at.into();
    let bound = |b: &&Binding| b.keys.iter().any(|k| k.matches(ev));
    if let Some(b) = BINDINGS.iter().filter(bound).find(|b| applies(b, mode, at)) {
        return Some(b.intent.clone());
    }
    if let Some((b, key)) = BINDINGS
        .iter()
        .filter(|b| b.mode == mode)
        .find_map(|b| Some((b, b.keys.iter().find(|k| k.matches(ev))?)))
    {
        return Some(Intent::Elsewhere(Elsewhere {
            key: key.label(),
            what: b.name,
            panes: b.panes,
            writes: b.writes,
            behind: b.in_pane(at.pane),
        }));
    }
    match (mode, ev.code) {
        (Mode::Filter | Mode::Prompt, KeyCode::Char(c))
            if !ev.modifiers.contains(KeyModifiers::CONTROL) =>
        {
            Some(Intent::Input(c))
        }
        _ => None,
    }
}

/// The bindings of a mode that apply in a place, in table order.
pub fn bindings(mode: Mode, at: impl Into<At>) -> impl Iterator<Item = &'static Binding> {
    let at = at.into();
    BINDINGS.iter().filter(move |b| applies(b, mode, at))
}

/// `j/↓`: every key of a binding.
pub fn keys_label(b: &Binding) -> String {
    b.keys.iter().map(Key::label).collect::<Vec<_>>().join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(c: KeyCode, m: KeyModifiers) -> KeyEvent {
        KeyEvent::new(c, m)
    }

    #[test]
    fn table_dispatches_per_mode_and_pane() {
        let j = key(KeyCode::Char('j'), KeyModifiers::NONE);
        assert_eq!(lookup(Mode::Normal, Pane::Items, &j), Some(Intent::Down));
        assert_eq!(
            lookup(Mode::Filter, Pane::Items, &j),
            Some(Intent::Input('j'))
        );
        let big_r = key(KeyCode::Char('R'), KeyModifiers::SHIFT);
        assert_eq!(
            lookup(Mode::Normal, Pane::Items, &big_r),
            Some(Intent::RequeueSelected)
        );
        assert!(
            matches!(
                lookup(Mode::Normal, Pane::Activity, &big_r),
                Some(Intent::Elsewhere(e)) if e.panes == LISTS && e.key == "R"
            ),
            "R on Activity says where it works"
        );
        let z = key(KeyCode::Char('z'), KeyModifiers::NONE);
        assert_eq!(lookup(Mode::Normal, Pane::Batches, &z), None);
        let ctrl_c = key(KeyCode::Char('c'), KeyModifiers::CONTROL);
        for mode in [
            Mode::Normal,
            Mode::Filter,
            Mode::Prompt,
            Mode::Confirm,
            Mode::Help,
        ] {
            assert_eq!(
                lookup(mode, Pane::Log, &ctrl_c),
                Some(Intent::Quit),
                "{mode:?}"
            );
        }
        let enter = key(KeyCode::Enter, KeyModifiers::NONE);
        assert_eq!(
            lookup(Mode::Confirm, Pane::Items, &enter),
            Some(Intent::Confirm(false)),
            "Enter in a confirm dialog means No"
        );
        let open = key(KeyCode::Char('['), KeyModifiers::NONE);
        assert_eq!(
            lookup(Mode::Normal, Pane::Items, &open),
            Some(Intent::PrevBatch)
        );
    }

    /// Every key of a mode does something or says where it works, in
    /// every pane.
    #[test]
    fn a_key_bound_in_other_panes_says_where() {
        for b in BINDINGS.iter().filter(|b| !b.panes.is_empty()) {
            for pane in Pane::ALL.iter().filter(|p| !b.panes.contains(p)) {
                for k in b.keys {
                    let ev = key(k.code, KeyModifiers::NONE);
                    let Some(Intent::Elsewhere(e)) = lookup(b.mode, *pane, &ev) else {
                        panic!("{} in {pane:?}: silent", k.label());
                    };
                    assert_eq!((e.panes, e.what), (b.panes, b.name));
                    assert!(!e.says(false).contains(pane.title()), "{}", e.says(false));
                }
            }
        }
    }

    #[test]
    fn every_key_is_bound_once_per_mode_and_pane() {
        for mode in [
            Mode::Normal,
            Mode::Filter,
            Mode::Prompt,
            Mode::Confirm,
            Mode::Help,
            Mode::Notice,
        ] {
            for pane in Pane::ALL {
                let mut seen = Vec::new();
                for b in bindings(mode, pane) {
                    for k in b.keys {
                        assert!(
                            !seen.contains(k),
                            "{mode:?} {pane:?}: {} bound twice",
                            k.label()
                        );
                        seen.push(*k);
                    }
                }
            }
        }
    }
}
