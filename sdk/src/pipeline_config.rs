//! The config's `[[pipelines]]`: pipelines of the project's own glue over tasks the
//! config declares, so that `modelless serve` serves them as models.

use std::path::PathBuf;
#[cfg(feature = "ocr")]
use std::sync::Arc;

use modelless_runtime::Error;
#[cfg(feature = "ocr")]
use modelless_runtime::registry::PipelineGlue;
use serde::{Deserialize, Serialize};

/// The glues a config can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GlueKind {
    /// `ocr::ReadText` (feature `ocr`): a page in, its lines' text, boxes and scores out.
    ReadText,
    /// `ocr::FindLines`, read-text's first half: a page in, its lines' cuts (PNG) and
    /// boxes out; runs only the detection task.
    FindLines,
    /// `ocr::ReadLine`, read-text's second half: one line's cut in, its text out; runs
    /// the direction and recognition tasks.
    ReadLine,
}

/// How the OCR glues pad the recogniser's inputs (`ocr::LinePadding`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LinePaddingKind {
    /// As RapidOCR: a page's lines by aspect, six at a time, each six as wide as the
    /// widest; lines read as RapidOCR reads them.
    #[default]
    PageGroups,
    /// Each line to its width rounded up to 64 columns: less padding.
    Steps,
}

/// One pipeline of the config.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineConfig {
    /// The name it is served by.
    pub name: String,
    /// Its glue.
    pub glue: GlueKind,
    /// The recogniser's dictionary, one character a line.
    pub dictionary: PathBuf,
    /// The detection task (default `detect-text`).
    #[serde(default)]
    pub detect: Option<String>,
    /// The direction task (default `text-direction`; `""` for none).
    #[serde(default)]
    pub direction: Option<String>,
    /// The recognition task (default `recognize-text`).
    #[serde(default)]
    pub recognize: Option<String>,
    /// Lines answered per page at most (default 100).
    #[serde(default)]
    pub max_lines: Option<usize>,
    /// How the recogniser's inputs are padded (default `page-groups`).
    #[serde(default)]
    pub line_padding: LinePaddingKind,
}

impl PipelineConfig {
    /// Checks what can be checked before anything is loaded.
    pub fn validate(&self) -> Result<(), Error> {
        if self.name.is_empty() {
            return Err(Error::Config("a pipeline needs a name".into()));
        }
        if self.max_lines == Some(0) {
            return Err(Error::Config(format!("pipeline `{}`: max_lines must be at least 1", self.name)));
        }
        if cfg!(not(feature = "ocr")) {
            return Err(Error::Config(format!(
                "pipeline `{}`: the OCR glues need modelless built with feature `ocr`",
                self.name
            )));
        }
        Ok(())
    }

    /// Its glue, reading the files it names.
    #[cfg(feature = "ocr")]
    pub fn glue(&self) -> Result<Arc<dyn PipelineGlue>, Error> {
        use modelless_runtime::ocr::{Alphabet, FindLines, ReadLine, ReadText};
        let dictionary = std::fs::read_to_string(&self.dictionary)
            .map_err(|e| Error::io("read the dictionary of", &self.dictionary, e))?;
        let glue = ReadText::new(self.read_text_config(), Alphabet::from_dictionary(&dictionary));
        Ok(match self.glue {
            GlueKind::ReadText => Arc::new(glue),
            GlueKind::FindLines => Arc::new(FindLines(glue)),
            GlueKind::ReadLine => Arc::new(ReadLine(glue)),
        })
    }

    /// The glue's stages and settings: the tasks it names, or their defaults.
    #[cfg(feature = "ocr")]
    pub fn read_text_config(&self) -> modelless_runtime::ocr::ReadTextConfig {
        use modelless_runtime::ocr::{LinePadding, ReadTextConfig};
        let defaults = ReadTextConfig::default();
        ReadTextConfig {
            detect: self.detect.clone().unwrap_or(defaults.detect.clone()),
            direction: match self.direction.as_deref() {
                None => defaults.direction.clone(),
                Some("") => None,
                Some(task) => Some(task.to_string()),
            },
            recognize: self.recognize.clone().unwrap_or(defaults.recognize.clone()),
            max_lines: self.max_lines.unwrap_or(defaults.max_lines),
            padding: match self.line_padding {
                LinePaddingKind::PageGroups => LinePadding::PageGroups,
                LinePaddingKind::Steps => LinePadding::Steps,
            },
            ..defaults
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(extra: &str) -> Result<PipelineConfig, toml::de::Error> {
        toml::from_str(&format!("name = \"read-text\"\nglue = \"read-text\"\ndictionary = \"d.txt\"\n{extra}"))
    }

    #[test]
    fn line_padding_reads_as_rapidocr_unless_told_steps() {
        assert_eq!(parsed("").unwrap().line_padding, LinePaddingKind::PageGroups);
        assert_eq!(parsed("line_padding = \"steps\"").unwrap().line_padding, LinePaddingKind::Steps);
        let wrong = parsed("line_padding = \"sideways\"").unwrap_err().to_string();
        assert!(wrong.contains("page-groups") && wrong.contains("steps"), "{wrong}");
    }
}
