//! Stop strings (the OpenAI API's `stop`): generation ends at the first place where the
//! generated text contains one of them, and the text returned ends just before it. Streamed text
//! holds back any tail that could still grow into a stop string, so no client ever sees part of
//! one.

/// The text a generation has released so far, cut at the first stop string.
#[derive(Debug, Default)]
pub struct StopFilter {
    stops: Vec<String>,
    /// Everything generated, up to the stop string once one is found.
    text: String,
    /// Bytes of `text` already released.
    released: usize,
    stopped: bool,
}

impl StopFilter {
    /// A filter for `stops` (empty strings are ignored).
    pub fn new(stops: &[String]) -> StopFilter {
        StopFilter {
            stops: stops.iter().filter(|s| !s.is_empty()).cloned().collect(),
            ..StopFilter::default()
        }
    }

    /// True once a stop string has appeared.
    pub fn stopped(&self) -> bool {
        self.stopped
    }

    /// The text of the response: everything before the stop string.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Adds a piece of generated text and returns the text that can now be released (nothing
    /// once stopped).
    pub fn push(&mut self, piece: &str) -> String {
        if self.stopped {
            return String::new();
        }
        self.text.push_str(piece);
        let found = self.stops.iter().filter_map(|s| self.text.find(s)).min();
        let end = match found {
            Some(at) => {
                self.stopped = true;
                self.text.truncate(at);
                at
            }
            None => self.text.len() - self.held_back(),
        };
        let out = self.text[self.released..end].to_string();
        self.released = end;
        out
    }

    /// Releases what is held back: the generation ended without a stop string.
    pub fn finish(&mut self) -> String {
        let out = self.text[self.released..].to_string();
        self.released = self.text.len();
        out
    }

    /// Length of the longest tail of the text that is a proper prefix of a stop string, cut
    /// to a character boundary.
    fn held_back(&self) -> usize {
        let longest = self.stops.iter().map(String::len).max().unwrap_or(0);
        let from = self.text.len().saturating_sub(longest.saturating_sub(1));
        (from..self.text.len())
            .filter(|&at| self.text.is_char_boundary(at))
            .find(|&at| {
                let tail = &self.text[at..];
                self.stops.iter().any(|s| s.starts_with(tail))
            })
            .map_or(0, |at| self.text.len() - at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(stops: &[&str], pieces: &[&str]) -> (Vec<String>, String, bool) {
        let stops: Vec<String> = stops.iter().map(|s| s.to_string()).collect();
        let mut filter = StopFilter::new(&stops);
        let mut released: Vec<String> = pieces.iter().map(|p| filter.push(p)).collect();
        if !filter.stopped() {
            released.push(filter.finish());
        }
        (released, filter.text().to_string(), filter.stopped())
    }

    #[test]
    fn text_without_stops_is_released_as_it_comes() {
        let (released, text, stopped) = run(&[], &["Hello", ", ", "world"]);
        assert_eq!(released, ["Hello", ", ", "world", ""]);
        assert_eq!(text, "Hello, world");
        assert!(!stopped);
    }

    #[test]
    fn a_stop_split_over_pieces_is_never_released() {
        let (released, text, stopped) = run(&["\n\n"], &["Paris.", "\n", "\nThe"]);
        assert_eq!(released, ["Paris.", "", ""]);
        assert_eq!(text, "Paris.");
        assert!(stopped);
    }

    #[test]
    fn a_held_prefix_that_does_not_complete_is_released() {
        let (released, text, stopped) = run(&["END"], &["a E", "N", "x", " done"]);
        assert_eq!(released, ["a ", "", "ENx", " done", ""]);
        assert_eq!(text, "a ENx done");
        assert!(!stopped);
    }

    #[test]
    fn the_earliest_of_several_stops_wins() {
        let (released, text, _) = run(&["world", "lo"], &["Hello world"]);
        assert_eq!(released, ["Hel"]);
        assert_eq!(text, "Hel");
    }

    #[test]
    fn text_after_the_stop_is_dropped() {
        let stops = vec!["!".to_string()];
        let mut filter = StopFilter::new(&stops);
        assert_eq!(filter.push("Hi! there"), "Hi");
        assert_eq!(filter.push("more"), "");
        assert_eq!(filter.text(), "Hi");
    }

    #[test]
    fn held_back_text_stays_on_character_boundaries() {
        // "é" is two bytes; the stop starts with the same first byte as neither.
        let (released, text, _) = run(&["éa"], &["café", "b"]);
        assert_eq!(released, ["caf", "éb", ""]);
        assert_eq!(text, "caféb");
    }
}
