//! Colours for 256-colour and 16-colour terminals, and none at all
//! (`NO_COLOR`, `--no-color`): there meaning is carried by bold, reverse
//! and underline only, so nothing depends on colour to be read. Also the
//! role an item's state or an event's kind takes, wherever it is shown.

use ratatui::style::{Color, Modifier, Style};

use crate::model::{Outcome, Status};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Palette {
    Mono,
    Ansi16,
    Ansi256,
}

impl Palette {
    /// From the environment: `NO_COLOR` (or `--no-color`) wins, then
    /// `COLORTERM`/`TERM` saying 256 colours or more.
    pub fn detect(no_color_flag: bool) -> Palette {
        let env = |k: &str| std::env::var(k).unwrap_or_default();
        if no_color_flag || !env("NO_COLOR").is_empty() {
            return Palette::Mono;
        }
        let colorterm = env("COLORTERM");
        let term = env("TERM");
        if colorterm.contains("truecolor")
            || colorterm.contains("24bit")
            || term.contains("256color")
            || term.contains("direct")
        {
            Palette::Ansi256
        } else if term == "dumb" {
            Palette::Mono
        } else {
            Palette::Ansi16
        }
    }
}

/// What a style means; the palette decides how it looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Normal,
    Dim,
    Title,
    Ok,
    Fail,
    Warn,
    Accent,
    Selected,
    Badge,
    Key,
}

impl Palette {
    pub fn style(self, role: Role) -> Style {
        let s = Style::default();
        match self {
            Palette::Mono => match role {
                Role::Normal | Role::Ok | Role::Dim | Role::Accent => s,
                Role::Title | Role::Key => s.add_modifier(Modifier::BOLD),
                Role::Fail => s.add_modifier(Modifier::BOLD),
                Role::Warn => s.add_modifier(Modifier::UNDERLINED),
                Role::Selected => s.add_modifier(Modifier::REVERSED),
                Role::Badge => s.add_modifier(Modifier::REVERSED | Modifier::BOLD),
            },
            Palette::Ansi16 => match role {
                Role::Normal => s,
                Role::Dim => s.fg(Color::DarkGray),
                Role::Title => s.fg(Color::Cyan).add_modifier(Modifier::BOLD),
                Role::Ok => s.fg(Color::Green),
                Role::Fail => s.fg(Color::Red).add_modifier(Modifier::BOLD),
                Role::Warn => s.fg(Color::Yellow),
                Role::Accent => s.fg(Color::Cyan),
                Role::Selected => s.add_modifier(Modifier::REVERSED),
                Role::Badge => s
                    .fg(Color::Black)
                    .bg(Color::Yellow)
                    .add_modifier(Modifier::BOLD),
                Role::Key => s.fg(Color::Cyan).add_modifier(Modifier::BOLD),
            },
            Palette::Ansi256 => match role {
                Role::Normal => s,
                Role::Dim => s.fg(Color::Indexed(245)),
                Role::Title => s.fg(Color::Indexed(117)).add_modifier(Modifier::BOLD),
                Role::Ok => s.fg(Color::Indexed(114)),
                Role::Fail => s.fg(Color::Indexed(203)).add_modifier(Modifier::BOLD),
                Role::Warn => s.fg(Color::Indexed(221)),
                Role::Accent => s.fg(Color::Indexed(117)),
                Role::Selected => s.bg(Color::Indexed(238)).add_modifier(Modifier::BOLD),
                Role::Badge => s
                    .fg(Color::Indexed(16))
                    .bg(Color::Indexed(221))
                    .add_modifier(Modifier::BOLD),
                Role::Key => s.fg(Color::Indexed(117)).add_modifier(Modifier::BOLD),
            },
        }
    }
}

/// The role an item's state takes wherever it is shown.
pub fn state_role(status: Status, outcome: Option<Outcome>) -> Role {
    match (status, outcome) {
        (Status::Failed, _) => Role::Fail,
        (Status::Done, Some(Outcome::Empty)) => Role::Warn,
        (Status::Done, _) => Role::Ok,
        (Status::Claimed, _) => Role::Accent,
        (Status::Pending, _) => Role::Normal,
    }
}

/// How an event kind is shown.
pub fn kind_role(kind: &str) -> Role {
    match kind {
        "failed" | "quarantined" | "crashed" | "aborted" => Role::Fail,
        "empty" | "lock-held" | "lock-takeover" | "paused" | "retry" => Role::Warn,
        "done" => Role::Ok,
        "run-started" | "run-finished" | "requeued" | "skipped" | "unpaused" | "fire" => {
            Role::Accent
        }
        _ => Role::Normal,
    }
}
