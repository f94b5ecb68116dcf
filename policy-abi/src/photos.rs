//! What a request costs where requests carry photos, by a variant's capacity with
//! photos: its image profile, measured decoding, resizing and inference together on
//! the cores they share, per size class. The photos' mean size picks the class,
//! interpolating between two measured ones.

use crate::snapshot::{PhotoCapacity, PhotoTraffic};

/// The machine time (ms) one request of a task whose traffic is `traffic` takes on
/// a variant measured at `capacities`: its photos at the capacity of their size
/// (linear in the mean encoded size between the classes measured, the nearest
/// class's beyond them), its tensors at `tensor_ms`. `None` without a capacity.
pub fn photo_request_ms(capacities: &[PhotoCapacity], traffic: PhotoTraffic, tensor_ms: f64) -> Option<f64> {
    let mut classes: Vec<(f64, f64)> = capacities
        .iter()
        .filter(|c| c.requests_per_s > 0.0)
        .map(|c| (c.mean_bytes as f64, 1e3 / c.requests_per_s))
        .collect();
    classes.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (first, last) = (*classes.first()?, *classes.last()?);
    let size = traffic.mean_bytes;
    let photo_ms = if size <= first.0 {
        first.1
    } else if size >= last.0 {
        last.1
    } else {
        let upper = classes.iter().position(|c| c.0 >= size).unwrap_or(classes.len() - 1);
        let (low, high) = (classes[upper - 1], classes[upper]);
        let along = if high.0 > low.0 { (size - low.0) / (high.0 - low.0) } else { 0.0 };
        low.1 + along * (high.1 - low.1)
    };
    let share = traffic.share.clamp(0.0, 1.0);
    Some(share * photo_ms + (1.0 - share) * tensor_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(mean_bytes: u64, requests_per_s: f64) -> PhotoCapacity {
        PhotoCapacity { size_class: format!("{mean_bytes}"), mean_bytes, requests_per_s }
    }

    #[test]
    fn the_photos_size_picks_or_interpolates_the_class_and_tensors_keep_their_cost() {
        // 40 kB photos at 100/s (10 ms), 1 MB ones at 10/s (100 ms), given out of order.
        let classes = [class(1_000_000, 10.0), class(40_000, 100.0)];
        let photos = |mean_bytes: f64| PhotoTraffic { share: 1.0, mean_bytes };
        assert_eq!(photo_request_ms(&classes, photos(40_000.0), 2.0), Some(10.0));
        assert_eq!(photo_request_ms(&classes, photos(10_000.0), 2.0), Some(10.0), "below the smallest: its cost");
        assert_eq!(photo_request_ms(&classes, photos(5e6), 2.0), Some(100.0), "above the largest: its cost");
        let halfway = photo_request_ms(&classes, photos(520_000.0), 2.0).unwrap();
        assert!((halfway - 55.0).abs() < 1e-9, "{halfway}");
        // A quarter of the requests carry tensors, at 2 ms a request.
        let mixed = photo_request_ms(&classes, PhotoTraffic { share: 0.75, mean_bytes: 40_000.0 }, 2.0).unwrap();
        assert!((mixed - (0.75 * 10.0 + 0.25 * 2.0)).abs() < 1e-9, "{mixed}");
        assert_eq!(photo_request_ms(&[], photos(40_000.0), 2.0), None, "nothing measured");
        assert_eq!(photo_request_ms(&[class(40_000, 0.0)], photos(40_000.0), 2.0), None, "nothing served");
    }
}
