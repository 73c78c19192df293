//! Keys as they were pressed. A terminal sends Esc as one byte and ↓ as
//! `ESC [ B`; pressed quickly one after the other they arrive in one read
//! as `ESC ESC [ B`, which crossterm decodes as Esc, `[`, `B` (its parser
//! takes `ESC ESC` for one Esc and loses the second escape). The `[` would
//! then switch the batch and the ↓ be lost. Esc and a key (`ESC j`,
//! `ESC CR`) read together decode as Alt+key, and the Esc is lost. The
//! dashboard binds no Alt keys, so the input thread gives such keys back
//! as pressed: Esc, then the key (as vim does with a fast Esc).

use std::time::Duration;

use crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};

/// Events that can follow an Esc in one sequence (`[`, digits, the final).
const MAX_SEQUENCE: usize = 4;

fn is_key(ev: &Event, code: KeyCode) -> bool {
    matches!(ev, Event::Key(k) if k.code == code && !k.modifiers.intersects(KeyModifiers::CONTROL | KeyModifiers::ALT))
}

fn char_of(ev: &Event) -> Option<char> {
    match ev {
        Event::Key(KeyEvent {
            code: KeyCode::Char(c),
            modifiers,
            ..
        }) if !modifiers.intersects(KeyModifiers::CONTROL | KeyModifiers::ALT) => Some(*c),
        _ => None,
    }
}

/// The key a decoded escape sequence (without its ESC) stands for: the
/// cursor keys in both modes, Home/End, PgUp/PgDn, Delete, Shift-Tab.
fn sequence_key(chars: &[char]) -> Option<KeyCode> {
    Some(match chars {
        ['[' | 'O', 'A'] => KeyCode::Up,
        ['[' | 'O', 'B'] => KeyCode::Down,
        ['[' | 'O', 'C'] => KeyCode::Right,
        ['[' | 'O', 'D'] => KeyCode::Left,
        ['[' | 'O', 'H'] | ['[', '1' | '7', '~'] => KeyCode::Home,
        ['[' | 'O', 'F'] | ['[', '4' | '8', '~'] => KeyCode::End,
        ['[', '5', '~'] => KeyCode::PageUp,
        ['[', '6', '~'] => KeyCode::PageDown,
        ['[', '3', '~'] => KeyCode::Delete,
        ['[', 'Z'] => KeyCode::BackTab,
        _ => return None,
    })
}

/// Whether `rest` (what followed an Esc) may still grow into a sequence.
fn may_continue(rest: &[Event]) -> bool {
    match rest.iter().map(char_of).collect::<Option<Vec<char>>>() {
        Some(chars) => match chars.as_slice() {
            ['[' | 'O'] => true,
            ['[', more @ ..] => more.iter().all(char::is_ascii_digit),
            _ => false,
        },
        None => false,
    }
}

/// An Esc and the events read with it, as pressed: Esc then the key of
/// the sequence they spell, else unchanged.
pub fn rejoin(esc: Event, rest: Vec<Event>) -> Vec<Event> {
    let chars: Option<Vec<char>> = rest.iter().map(char_of).collect();
    match chars.as_deref().and_then(sequence_key) {
        Some(code) => vec![esc, Event::Key(KeyEvent::from(code))],
        None => std::iter::once(esc)
            .chain(rest.into_iter().flat_map(unmeta))
            .collect(),
    }
}

/// An Alt+key as Esc, then the key.
pub fn unmeta(ev: Event) -> Vec<Event> {
    match ev {
        Event::Key(mut k)
            if k.modifiers.contains(KeyModifiers::ALT)
                && !k.modifiers.contains(KeyModifiers::CONTROL) =>
        {
            k.modifiers.remove(KeyModifiers::ALT);
            vec![Event::Key(KeyEvent::from(KeyCode::Esc)), Event::Key(k)]
        }
        other => vec![other],
    }
}

/// The next keys from the terminal (blocking): one event, or an Esc with
/// the key or sequence that came with it, split back into two keys.
pub fn read() -> std::io::Result<Vec<Event>> {
    let first = crossterm::event::read()?;
    if !is_key(&first, KeyCode::Esc) {
        return Ok(unmeta(first));
    }
    let mut rest = Vec::new();
    // Only what is already there: a key pressed later is not part of it.
    while rest.len() < MAX_SEQUENCE && crossterm::event::poll(Duration::ZERO)? {
        rest.push(crossterm::event::read()?);
        if !may_continue(&rest) {
            break;
        }
    }
    Ok(rejoin(first, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(c: KeyCode) -> Event {
        Event::Key(KeyEvent::from(c))
    }

    fn chars(s: &str) -> Vec<Event> {
        s.chars()
            .map(|c| {
                let m = if c.is_ascii_uppercase() {
                    KeyModifiers::SHIFT
                } else {
                    KeyModifiers::NONE
                };
                Event::Key(KeyEvent::new(KeyCode::Char(c), m))
            })
            .collect()
    }

    #[test]
    fn an_esc_and_an_arrow_read_together_are_two_keys() {
        let esc = key(KeyCode::Esc);
        assert_eq!(
            rejoin(esc.clone(), chars("[B")),
            [esc.clone(), key(KeyCode::Down)]
        );
        assert_eq!(
            rejoin(esc.clone(), chars("OA")),
            [esc.clone(), key(KeyCode::Up)]
        );
        assert_eq!(
            rejoin(esc.clone(), chars("[6~")),
            [esc.clone(), key(KeyCode::PageDown)]
        );
        // Anything else is left as it was read.
        assert_eq!(rejoin(esc.clone(), chars("[x")), {
            let mut v = vec![esc.clone()];
            v.extend(chars("[x"));
            v
        });
        assert_eq!(rejoin(esc.clone(), Vec::new()), std::slice::from_ref(&esc));
    }

    #[test]
    fn an_alt_key_is_an_esc_and_the_key() {
        let alt_enter = Event::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::ALT));
        assert_eq!(unmeta(alt_enter), [key(KeyCode::Esc), key(KeyCode::Enter)]);
        let ctrl_alt = Event::Key(KeyEvent::new(
            KeyCode::Char('c'),
            KeyModifiers::ALT | KeyModifiers::CONTROL,
        ));
        assert_eq!(unmeta(ctrl_alt.clone()), [ctrl_alt]);
        assert_eq!(unmeta(key(KeyCode::Down)), [key(KeyCode::Down)]);
    }

    #[test]
    fn reads_ahead_only_while_a_sequence_may_follow() {
        assert!(may_continue(&chars("[")));
        assert!(may_continue(&chars("O")));
        assert!(may_continue(&chars("[5")));
        assert!(!may_continue(&chars("[B")));
        assert!(!may_continue(&chars("q")));
        assert!(!may_continue(&[key(KeyCode::Enter)]));
    }
}
