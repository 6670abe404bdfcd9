//! Editable text and how text fits on screen: [`TextInput`] (one line or many, with a cursor and
//! the usual editing keys), [`wrap`] (hard wrap to a width, with the cursor's screen position)
//! shared by the Prompt field and the output pane, and [`window`] (the part of one line that shows
//! around the cursor).

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// Text being edited: the text and a cursor (a byte offset on a character boundary).
#[derive(Clone, Debug, PartialEq)]
pub struct TextInput {
    text: String,
    cursor: usize,
    multiline: bool,
}

impl TextInput {
    /// `text` with the cursor at its end.
    pub fn new(text: &str, multiline: bool) -> TextInput {
        TextInput {
            text: text.to_string(),
            cursor: text.len(),
            multiline,
        }
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn cursor(&self) -> usize {
        self.cursor
    }

    pub fn is_multiline(&self) -> bool {
        self.multiline
    }

    /// Replaces the text; the cursor goes to its end.
    pub fn set(&mut self, text: &str) {
        self.text = text.to_string();
        self.cursor = self.text.len();
    }

    /// Applies an editing key (characters, Backspace, Delete, arrows, Home, End, Ctrl-U to clear,
    /// Enter for a new line when multi-line). Returns false for keys that are not editing keys.
    pub fn handle_key(&mut self, key: KeyEvent) -> bool {
        let control = key
            .modifiers
            .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT);
        match key.code {
            KeyCode::Char('u') if key.modifiers == KeyModifiers::CONTROL => self.set(""),
            KeyCode::Char(c) if !control => self.insert(c),
            KeyCode::Enter if self.multiline => self.insert('\n'),
            KeyCode::Backspace => {
                if let Some(c) = self.text[..self.cursor].chars().next_back() {
                    self.cursor -= c.len_utf8();
                    self.text.remove(self.cursor);
                }
            }
            KeyCode::Delete => {
                if self.cursor < self.text.len() {
                    self.text.remove(self.cursor);
                }
            }
            KeyCode::Left => {
                if let Some(c) = self.text[..self.cursor].chars().next_back() {
                    self.cursor -= c.len_utf8();
                }
            }
            KeyCode::Right => {
                if let Some(c) = self.text[self.cursor..].chars().next() {
                    self.cursor += c.len_utf8();
                }
            }
            KeyCode::Home => self.cursor = self.line_start(self.cursor),
            KeyCode::End => self.cursor = self.line_end(self.cursor),
            KeyCode::Up if self.multiline => self.move_line(false),
            KeyCode::Down if self.multiline => self.move_line(true),
            _ => return false,
        }
        true
    }

    fn insert(&mut self, c: char) {
        self.text.insert(self.cursor, c);
        self.cursor += c.len_utf8();
    }

    fn line_start(&self, at: usize) -> usize {
        self.text[..at].rfind('\n').map_or(0, |i| i + 1)
    }

    fn line_end(&self, at: usize) -> usize {
        self.text[at..]
            .find('\n')
            .map_or(self.text.len(), |i| at + i)
    }

    /// Moves the cursor to the same column (in characters) of the next or previous line, or to
    /// that line's end when it is shorter.
    fn move_line(&mut self, down: bool) {
        let start = self.line_start(self.cursor);
        let column = self.text[start..self.cursor].chars().count();
        let target_start = if down {
            let end = self.line_end(self.cursor);
            if end == self.text.len() {
                return;
            }
            end + 1
        } else {
            if start == 0 {
                return;
            }
            self.line_start(start - 1)
        };
        let target_end = self.line_end(target_start);
        self.cursor = self.text[target_start..target_end]
            .char_indices()
            .nth(column)
            .map_or(target_end, |(i, _)| target_start + i);
    }
}

/// Text cut into screen lines.
#[derive(Clone, Debug, PartialEq)]
pub struct Wrapped {
    pub lines: Vec<String>,
    /// Row and column of the cursor, when one was given.
    pub cursor: Option<(usize, usize)>,
}

/// Cuts `text` into lines of at most `width` characters, breaking at each `\n` and wherever a
/// line is full; control characters show as spaces. With `cursor` (a byte offset), also says
/// where it lands (kept inside the last column of a full line).
pub fn wrap(text: &str, width: usize, cursor: Option<usize>) -> Wrapped {
    let width = width.max(1);
    let mut lines = vec![String::new()];
    let mut column = 0;
    let mut at = None;
    let place = |lines: &[String], column: usize| Some((lines.len() - 1, column.min(width - 1)));
    for (i, c) in text.char_indices() {
        if cursor == Some(i) {
            at = place(&lines, column);
        }
        if c == '\n' {
            lines.push(String::new());
            column = 0;
            continue;
        }
        if column == width {
            lines.push(String::new());
            column = 0;
        }
        let line = lines.last_mut().expect("at least one line");
        line.push(if c.is_control() { ' ' } else { c });
        column += 1;
    }
    if cursor == Some(text.len()) {
        at = place(&lines, column);
    }
    Wrapped { lines, cursor: at }
}

/// The part of a one-line `text` that fits in `width` characters with the cursor (a byte offset)
/// visible, and the cursor's column in it.
pub fn window(text: &str, cursor: usize, width: usize) -> (String, usize) {
    let width = width.max(1);
    let before = text[..cursor].chars().count();
    let skip = (before + 1).saturating_sub(width);
    let shown = text.chars().skip(skip).take(width).collect();
    (shown, before - skip)
}

/// `text` cut to `width` characters, its start replaced by `…` when it is longer (paths keep
/// their file name).
pub fn tail(text: &str, width: usize) -> String {
    let count = text.chars().count();
    if count <= width {
        return text.to_string();
    }
    let keep = width.saturating_sub(1);
    std::iter::once('…')
        .chain(text.chars().skip(count - keep))
        .take(width)
        .collect()
}

/// `text` cut to `width` characters, its end replaced by `…` when it is longer.
pub fn head(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(width.saturating_sub(1)).collect();
    if width > 0 {
        cut.push('…');
    }
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    fn press(input: &mut TextInput, code: KeyCode) -> bool {
        input.handle_key(KeyEvent::new(code, KeyModifiers::NONE))
    }

    fn type_text(input: &mut TextInput, text: &str) {
        for c in text.chars() {
            assert!(press(input, KeyCode::Char(c)));
        }
    }

    #[test]
    fn typing_editing_and_clearing() {
        let mut input = TextInput::new("", false);
        type_text(&mut input, "héllo");
        assert_eq!(input.text(), "héllo");
        press(&mut input, KeyCode::Left);
        press(&mut input, KeyCode::Left);
        press(&mut input, KeyCode::Left);
        press(&mut input, KeyCode::Backspace);
        assert_eq!(input.text(), "hllo");
        press(&mut input, KeyCode::Delete);
        assert_eq!(input.text(), "hlo");
        press(&mut input, KeyCode::Home);
        type_text(&mut input, ">");
        press(&mut input, KeyCode::End);
        type_text(&mut input, "!");
        assert_eq!(input.text(), ">hlo!");
        // Enter is not an editing key on one line; Ctrl-U clears.
        assert!(!press(&mut input, KeyCode::Enter));
        assert!(!press(&mut input, KeyCode::Up));
        assert!(input.handle_key(KeyEvent::new(KeyCode::Char('u'), KeyModifiers::CONTROL)));
        assert_eq!(input.text(), "");
        // Other control chords are left to the caller.
        assert!(!input.handle_key(KeyEvent::new(KeyCode::Char('r'), KeyModifiers::CONTROL)));
    }

    #[test]
    fn multiline_enter_and_vertical_moves_keep_the_column() {
        let mut input = TextInput::new("", true);
        type_text(&mut input, "abcdef");
        press(&mut input, KeyCode::Enter);
        type_text(&mut input, "xy");
        assert_eq!(input.text(), "abcdef\nxy");
        press(&mut input, KeyCode::Up);
        assert_eq!(input.cursor(), 2, "column 2 of the first line");
        press(&mut input, KeyCode::End);
        press(&mut input, KeyCode::Down);
        assert_eq!(
            input.cursor(),
            input.text().len(),
            "end of the shorter line"
        );
        press(&mut input, KeyCode::Down);
        assert_eq!(input.cursor(), input.text().len(), "no line below");
    }

    #[test]
    fn wrap_breaks_at_newlines_and_full_lines_and_places_the_cursor() {
        let w = wrap("abcdefg\nhi", 3, Some(9));
        assert_eq!(w.lines, ["abc", "def", "g", "hi"]);
        assert_eq!(w.cursor, Some((3, 1)));
        assert_eq!(wrap("", 5, Some(0)).cursor, Some((0, 0)));
        assert_eq!(
            wrap("abc", 3, Some(3)).cursor,
            Some((0, 2)),
            "kept in the line"
        );
        assert_eq!(
            wrap("a\tb", 0, None).lines,
            ["a", " ", "b"],
            "width 0 acts as 1"
        );
        assert_eq!(wrap("ab\n", 4, None).lines, ["ab", ""]);
    }

    #[test]
    fn window_keeps_the_cursor_visible_and_cuts_mark_the_cut() {
        assert_eq!(window("abcdef", 6, 4), ("def".to_string(), 3));
        assert_eq!(window("abcdef", 1, 4), ("abcd".to_string(), 1));
        assert_eq!(tail("/a/b/model.gguf", 8), "…el.gguf");
        assert_eq!(tail("short", 8), "short");
        assert_eq!(head("0123456789", 5), "0123…");
        assert_eq!(head("0123", 5), "0123");
    }
}
