//! nightshift-worker(7): the README's "The worker contract" section (with
//! its "Persistent mode"), turned from Markdown into roff, so that the page
//! and the README say the same thing.

use clap_mangen::roff::{Inline, Roff, bold, italic, line_break, roman};
use pulldown_cmark::{Event, HeadingLevel, Parser, Tag, TagEnd};

const README: &str = include_str!("../../../README.md");
const SECTION: &str = "## The worker contract";

/// The section's Markdown: from its heading to the next `## ` heading.
fn contract(readme: &str) -> Option<&str> {
    let start = readme.find(&format!("\n{SECTION}\n"))? + SECTION.len() + 2;
    let rest = &readme[start..];
    let end = rest.find("\n## ").unwrap_or(rest.len());
    Some(&rest[..end])
}

/// Markdown to roff, for what the README uses: headings, paragraphs,
/// bullet lists, code spans and blocks, emphasis, links (their text).
fn to_roff(markdown: &str, roff: &mut Roff) {
    let mut line: Vec<Inline> = Vec::new();
    let (mut strong, mut emphasis, mut lists) = (0, 0, 0);
    let mut code: Option<String> = None;
    let mut heading: Option<String> = None;
    let flush = |roff: &mut Roff, line: &mut Vec<Inline>| {
        if !line.is_empty() {
            roff.text(std::mem::take(line));
        }
    };
    for event in Parser::new(markdown) {
        match event {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::End(TagEnd::Heading(level)) => {
                let title = heading.take().unwrap_or_default();
                let name = if level <= HeadingLevel::H3 {
                    "SH"
                } else {
                    "SS"
                };
                roff.control(name, [title.to_uppercase().as_str()]);
            }
            Event::Start(Tag::Paragraph) if lists == 0 => {
                roff.control("PP", []);
            }
            Event::Start(Tag::Paragraph) => {}
            Event::End(TagEnd::Paragraph) => flush(roff, &mut line),
            Event::Start(Tag::List(_)) => {
                if lists > 0 {
                    flush(roff, &mut line);
                    roff.control("RS", ["2"]);
                }
                lists += 1;
            }
            Event::End(TagEnd::List(_)) => {
                lists -= 1;
                if lists > 0 {
                    roff.control("RE", []);
                }
            }
            Event::Start(Tag::Item) => {
                flush(roff, &mut line);
                roff.control("IP", ["\\(bu", "2"]);
            }
            Event::End(TagEnd::Item) => flush(roff, &mut line),
            Event::Start(Tag::CodeBlock(_)) => {
                flush(roff, &mut line);
                code = Some(String::new());
            }
            Event::End(TagEnd::CodeBlock) => {
                roff.control("PP", []);
                roff.control("RS", ["4"]);
                roff.control("nf", []);
                for l in code.take().unwrap_or_default().lines() {
                    roff.text([roman(l)]);
                }
                roff.control("fi", []);
                roff.control("RE", []);
            }
            Event::Start(Tag::Strong) => strong += 1,
            Event::End(TagEnd::Strong) => strong -= 1,
            Event::Start(Tag::Emphasis) => emphasis += 1,
            Event::End(TagEnd::Emphasis) => emphasis -= 1,
            Event::Text(text) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&text);
                } else if let Some(c) = code.as_mut() {
                    c.push_str(&text);
                } else if strong > 0 {
                    line.push(bold(text.to_string()));
                } else if emphasis > 0 {
                    line.push(italic(text.to_string()));
                } else {
                    line.push(roman(text.to_string()));
                }
            }
            Event::Code(text) => match heading.as_mut() {
                Some(h) => h.push_str(&text),
                None => line.push(bold(text.to_string())),
            },
            Event::SoftBreak => line.push(roman(" ")),
            Event::HardBreak => line.push(line_break()),
            // Links keep their text; HTML (the README's include markers) is dropped.
            _ => {}
        }
    }
    flush(roff, &mut line);
}

/// The page, after its `.TH` header.
pub(super) fn render(mut roff: Roff) -> anyhow::Result<Roff> {
    let section =
        contract(README).ok_or_else(|| anyhow::anyhow!("the README has no section {SECTION:?}"))?;
    roff.control("SH", ["NAME"]);
    roff.text([roman(
        "nightshift-worker - what nightshift gives a worker program, and what it reads back",
    )]);
    roff.control("SH", ["DESCRIPTION"]);
    to_roff(section, &mut roff);
    Ok(roff)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_readme_has_the_contract_and_it_becomes_roff() {
        let section = contract(README).expect("the README's worker contract");
        assert!(section.contains("NIGHTSHIFT_KEY") && section.contains("### Persistent mode"));
        let mut roff = Roff::new();
        to_roff(section, &mut roff);
        let text = roff.render();
        assert!(text.contains(".SH \"PERSISTENT MODE\""), "{text}");
        assert!(text.contains(".IP \\(bu 2\n\\fBstdin\\fR"), "{text}");
        assert!(text.contains("\\fBNIGHTSHIFT_OP_ID\\fR"));
        assert!(
            text.contains(".nf\n#!/usr/bin/env python3"),
            "the example worker"
        );
        assert!(!text.contains("<!--") && !text.contains("](") && !text.contains('`'));
    }
}
