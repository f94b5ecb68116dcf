//! Greedy CTC decoding of a recognition model's per-step character probabilities.

/// The characters a recognition model spells with: index 0 is CTC's blank, then the
/// dictionary's characters in order, then a space (PaddleOCR's convention).
#[derive(Clone, Debug, PartialEq)]
pub struct Alphabet {
    characters: Vec<String>,
}

/// A decoded line: its text and its confidence, the mean probability of the steps
/// that gave a character (0 for no character).
#[derive(Clone, Debug, PartialEq)]
pub struct Decoded {
    /// The line's text.
    pub text: String,
    /// Mean probability of the characters kept.
    pub score: f32,
}

impl Alphabet {
    /// The alphabet of a dictionary with one character per line (as PP-OCR models
    /// carry it in their metadata, key `character`).
    pub fn from_dictionary(dictionary: &str) -> Alphabet {
        let mut characters = vec![String::new()];
        characters.extend(dictionary.lines().map(|line| line.trim_end_matches('\r').to_string()));
        characters.push(" ".to_string());
        Alphabet { characters }
    }

    /// Classes the model's last dimension must have: the blank, the dictionary, a space.
    pub fn classes(&self) -> usize {
        self.characters.len()
    }

    /// Decodes `steps` rows of `classes` probabilities each: the most likely class of
    /// each step, a class repeated over consecutive steps counted once, blanks left out.
    pub fn decode(&self, probabilities: &[f32], steps: usize) -> Decoded {
        let classes = probabilities.len().checked_div(steps).unwrap_or(0);
        let (mut text, mut sum, mut kept, mut previous) = (String::new(), 0.0f32, 0usize, None);
        for row in probabilities.chunks_exact(classes.max(1)).take(steps) {
            let (best, p) =
                row.iter().copied().enumerate().fold((0, f32::MIN), |m, (i, p)| if p > m.1 { (i, p) } else { m });
            if best != 0
                && previous != Some(best)
                && let Some(character) = self.characters.get(best)
            {
                text.push_str(character);
                sum += p;
                kept += 1;
            }
            previous = Some(best);
        }
        Decoded { text, score: if kept == 0 { 0.0 } else { sum / kept as f32 } }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One step per class index, each sure of it (probability `p`).
    fn steps(indices: &[usize], classes: usize, p: f32) -> Vec<f32> {
        indices
            .iter()
            .flat_map(|&i| (0..classes).map(move |c| if c == i { p } else { (1.0 - p) / (classes - 1) as f32 }))
            .collect()
    }

    #[test]
    fn repeats_collapse_blanks_separate_and_the_space_comes_last() {
        let alphabet = Alphabet::from_dictionary("a\nb\nl\r\n");
        assert_eq!(alphabet.classes(), 5, "blank, a, b, l, space");
        // b a l l ␣ → "bal" only if the blank does not separate the two l's.
        let together = steps(&[2, 2, 1, 3, 3, 0, 4, 1], 5, 0.9);
        assert_eq!(alphabet.decode(&together, 8).text, "bal a");
        let apart = steps(&[2, 1, 3, 0, 3], 5, 0.9);
        let decoded = alphabet.decode(&apart, 5);
        assert_eq!(decoded.text, "ball");
        assert!((decoded.score - 0.9).abs() < 1e-6);
    }

    #[test]
    fn all_blanks_are_an_empty_line_scored_zero() {
        let alphabet = Alphabet::from_dictionary("x");
        assert_eq!(alphabet.decode(&steps(&[0, 0, 0], 3, 0.8), 3), Decoded { text: String::new(), score: 0.0 });
        assert_eq!(alphabet.decode(&[], 0).text, "");
    }
}
