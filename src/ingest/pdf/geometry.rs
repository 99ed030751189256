//! Page geometry: rects, pdfium user space ↔ displayed page, writing-direction frames.

/// `[x0, y0, x1, y1]`, x0 ≤ x1, y0 ≤ y1.
pub(super) type Rect = [f64; 4];

pub(super) fn union(a: Rect, b: Rect) -> Rect {
    [a[0].min(b[0]), a[1].min(b[1]), a[2].max(b[2]), a[3].max(b[3])]
}

pub(super) fn overlap(a0: f64, a1: f64, b0: f64, b1: f64) -> f64 {
    (a1.min(b1) - a0.max(b0)).max(0.0)
}

/// Maps pdfium user space (y up, unrotated, crop box anywhere) to the displayed page (points,
/// top-left origin, after `/Rotate`), and back.
#[derive(Clone, Copy, Debug)]
pub(super) struct Geom {
    pub(super) rotation: i32,
    /// Effective crop box in user space.
    pub(super) left: f64,
    bottom: f64,
    right: f64,
    top: f64,
    /// Displayed size.
    pub(super) width: f64,
    pub(super) height: f64,
}

impl Geom {
    pub(super) fn new(crop: [f64; 4], rotation: i32) -> Geom {
        let [left, bottom, right, top] = crop;
        let (w, h) = (right - left, top - bottom);
        let (width, height) = if rotation % 180 == 0 { (w, h) } else { (h, w) };
        Geom { rotation, left, bottom, right, top, width, height }
    }

    /// `/Rotate` turns the page clockwise for display.
    pub(super) fn to_display(self, x: f64, y: f64) -> (f64, f64) {
        match self.rotation {
            90 => (y - self.bottom, x - self.left),
            180 => (self.right - x, y - self.bottom),
            270 => (self.top - y, self.right - x),
            _ => (x - self.left, self.top - y),
        }
    }

    fn to_user(self, dx: f64, dy: f64) -> (f64, f64) {
        match self.rotation {
            90 => (dy + self.left, dx + self.bottom),
            180 => (self.right - dx, dy + self.bottom),
            270 => (self.right - dy, self.top - dx),
            _ => (dx + self.left, self.top - dy),
        }
    }

    /// User-space rect (left, bottom, right, top) → display rect.
    pub(super) fn rect_to_display(&self, l: f64, b: f64, r: f64, t: f64) -> Rect {
        let (x0, y0) = self.to_display(l, b);
        let (x1, y1) = self.to_display(r, t);
        [x0.min(x1), y0.min(y1), x0.max(x1), y0.max(y1)]
    }

    /// Display rect → user-space (left, bottom, right, top).
    pub(super) fn rect_to_user(&self, r: Rect) -> (f64, f64, f64, f64) {
        let (ax, ay) = self.to_user(r[0], r[1]);
        let (bx, by) = self.to_user(r[2], r[3]);
        (ax.min(bx), ay.min(by), ax.max(bx), ay.max(by))
    }

    pub(super) fn clamp(&self, r: Rect) -> Rect {
        [r[0].clamp(0.0, self.width), r[1].clamp(0.0, self.height), r[2].clamp(0.0, self.width), r[3].clamp(0.0, self.height)]
    }
}

/// Writing direction on the displayed page, counter-clockwise quarter turns: 0 = left to
/// right, 1 = bottom to top, 2 = upside down, 3 = top to bottom.
pub(super) type Dir = u8;

/// Rotate a display rect into the frame of direction `dir`, where that text runs left to right
/// and lines advance downwards (and back with [`from_frame`]).
pub(super) fn to_frame(dir: Dir, r: Rect, w: f64, h: f64) -> Rect {
    let map = |x: f64, y: f64| match dir {
        1 => (h - y, x),
        2 => (w - x, h - y),
        3 => (y, w - x),
        _ => (x, y),
    };
    let (ax, ay) = map(r[0], r[1]);
    let (bx, by) = map(r[2], r[3]);
    [ax.min(bx), ay.min(by), ax.max(bx), ay.max(by)]
}

pub(super) fn from_frame(dir: Dir, r: Rect, w: f64, h: f64) -> Rect {
    let map = |fx: f64, fy: f64| match dir {
        1 => (fy, h - fx),
        2 => (w - fx, h - fy),
        3 => (w - fy, fx),
        _ => (fx, fy),
    };
    let (ax, ay) = map(r[0], r[1]);
    let (bx, by) = map(r[2], r[3]);
    [ax.min(bx), ay.min(by), ax.max(bx), ay.max(by)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::pdf::tests::near;

    #[test]
    fn geometry_round_trips_for_every_rotation() {
        for rotation in [0, 90, 180, 270] {
            let g = Geom::new([20.0, 10.0, 420.0, 310.0], rotation);
            let (w, h) = if rotation % 180 == 0 { (400.0, 300.0) } else { (300.0, 400.0) };
            assert_eq!((g.width, g.height), (w, h));
            // The crop box corners land on the displayed page's corners.
            for (x, y) in [(20.0, 10.0), (420.0, 310.0), (20.0, 310.0), (420.0, 10.0)] {
                let (dx, dy) = g.to_display(x, y);
                assert!((near(dx, 0.0, 1e-9) || near(dx, w, 1e-9)) && (near(dy, 0.0, 1e-9) || near(dy, h, 1e-9)));
                let (ux, uy) = g.to_user(dx, dy);
                assert!(near(ux, x, 1e-9) && near(uy, y, 1e-9));
            }
            for dir in 0..4 {
                let r = [10.0, 20.0, 50.0, 35.0];
                let f = to_frame(dir, r, w, h);
                assert_eq!(from_frame(dir, f, w, h), r);
            }
        }
        // /Rotate 90 turns the page clockwise: the user-space top-left corner goes top-right.
        let g = Geom::new([0.0, 0.0, 612.0, 792.0], 90);
        assert_eq!(g.to_display(0.0, 792.0), (792.0, 0.0));
    }
}
