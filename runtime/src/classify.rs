//! Classification answers, as Triton's classification extension gives them: the `k`
//! highest scores of each row of an output, with their class index and label.

use std::path::Path;
use std::sync::Arc;

use crate::error::Error;
use crate::tensor::{Tensor, TensorData};

/// The largest label file read.
pub const MAX_LABELS_BYTES: u64 = 16 << 20;

/// One class of a row, among its `k` highest scores.
#[derive(Clone, Debug, PartialEq)]
pub struct Class {
    /// Its score, as the output holds it.
    pub score: f64,
    /// Its index in the row.
    pub index: usize,
    /// Its label, where the task has a label file with a line for it.
    pub label: Option<String>,
}

impl Class {
    /// As Triton writes it in a BYTES output: `score:index:label`, or `score:index`.
    pub fn to_triton(&self) -> String {
        match &self.label {
            Some(label) => format!("{:.6}:{}:{label}", self.score, self.index),
            None => format!("{:.6}:{}", self.score, self.index),
        }
    }
}

/// Labels, one per line, the line number being the class index.
pub fn read_labels(path: &Path) -> Result<Arc<[String]>, Error> {
    let unreadable = |e| Error::io("read the label file", path, e);
    let size = std::fs::metadata(path).map_err(unreadable)?.len();
    if size > MAX_LABELS_BYTES {
        return Err(Error::Config(format!(
            "label file {}: {size} bytes, more than the {MAX_LABELS_BYTES} read",
            path.display()
        )));
    }
    let text = std::fs::read_to_string(path).map_err(unreadable)?;
    Ok(text.lines().map(|l| l.trim_end_matches('\r').to_string()).collect())
}

/// The `k` highest scores of every row (dimension 0) of `output`, highest first; ties
/// go to the lower index. `k` larger than a row is cut to the row.
/// Refused for a bool output, which holds no scores; `model` names it in the error.
pub fn top_k(model: &str, output: &Tensor, k: usize, labels: Option<&[String]>) -> Result<Vec<Vec<Class>>, Error> {
    let scores: Vec<f64> = match output.data() {
        TensorData::F32(v) => v.iter().map(|&x| f64::from(x)).collect(),
        TensorData::F16(v) => v.iter().map(|&x| f64::from(x.to_f32())).collect(),
        TensorData::I64(v) => v.iter().map(|&x| x as f64).collect(),
        TensorData::I32(v) => v.iter().map(|&x| f64::from(x)).collect(),
        TensorData::U8(v) => v.iter().map(|&x| f64::from(x)).collect(),
        TensorData::Bool(_) => {
            return Err(Error::InvalidInput {
                model: model.to_string(),
                reason: "a bool output has no scores to classify".into(),
            });
        }
    };
    let rows = output.rows().max(1);
    let per_row = scores.len() / rows;
    Ok(scores
        .chunks(per_row.max(1))
        .take(rows)
        .map(|row| {
            let mut order: Vec<usize> = (0..row.len()).collect();
            order.sort_by(|&a, &b| row[b].total_cmp(&row[a]).then(a.cmp(&b)));
            order
                .into_iter()
                .take(k)
                .map(|index| Class { score: row[index], index, label: labels.and_then(|l| l.get(index)).cloned() })
                .collect()
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_row_gives_its_highest_scores_with_their_labels() {
        let logits = Tensor::new([2, 4], vec![0.1f32, 0.9, 0.5, 0.9, 3.0, -1.0, 2.0, 0.0]).unwrap();
        let labels: Vec<String> = ["cat", "dog", "fox"].map(String::from).to_vec();
        let classes = top_k("m", &logits, 2, Some(&labels)).unwrap();
        let picked: Vec<Vec<usize>> = classes.iter().map(|r| r.iter().map(|c| c.index).collect()).collect();
        assert_eq!(picked, vec![vec![1, 3], vec![0, 2]]);
        assert_eq!(classes[0][0].to_triton(), "0.900000:1:dog");
        assert_eq!(classes[0][1].to_triton(), "0.900000:3", "no label on line 3");
        assert_eq!(top_k("m", &logits, 10, None).unwrap()[1].len(), 4);
    }

    #[test]
    fn a_label_file_that_cannot_be_read_is_an_io_error_not_a_configuration_one() {
        let refused = read_labels(Path::new("/nonexistent/labels.txt")).err();
        let source = match &refused {
            Some(Error::Io { path, source, .. }) if path == Path::new("/nonexistent/labels.txt") => source.kind(),
            other => panic!("expected an I/O error, got {other:?}"),
        };
        assert_eq!(source, std::io::ErrorKind::NotFound);
        assert_eq!(refused.map(|e| e.kind()), Some(crate::ErrorKind::Io));
    }
}
