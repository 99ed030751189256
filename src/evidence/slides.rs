//! Where a block sits on a slide: the slide, the shape (its id, name, type and box in slide
//! EMU, group transforms applied), the paragraph in the shape or the row of its table, and
//! whether it is the slide's speaker notes.

use serde::{Deserialize, Serialize};

/// English Metric Units per PDF point (914400 EMU = 1 inch = 72 pt).
pub const EMU_PER_POINT: f64 = 12_700.0;

/// What a shape on a slide is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ShapeType {
    /// The title placeholder (`title`, `ctrTitle`): its text is the slide's section title.
    Title,
    /// Another placeholder (body, subtitle, …).
    Placeholder,
    /// A text box or an autoshape with text.
    Text,
    /// A table (`a:tbl`): each row is a block.
    Table,
    /// A picture: its text read by OCR.
    Picture,
    /// The speaker notes of the slide (no box on the slide).
    Notes,
}

impl ShapeType {
    pub fn as_str(self) -> &'static str {
        match self {
            ShapeType::Title => "title",
            ShapeType::Placeholder => "placeholder",
            ShapeType::Text => "text",
            ShapeType::Table => "table",
            ShapeType::Picture => "picture",
            ShapeType::Notes => "notes",
        }
    }
}

/// Slides: the place of a block on its slide (`locator.slide`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "SlidePlace")]
pub struct SlidePlace {
    /// 1-based, in the deck's order (`ppt/presentation.xml`).
    pub slide: u32,
    /// The shape's id on its slide (`p:cNvPr/@id`; ODP: its 1-based position).
    pub shape_id: u32,
    pub shape_name: String,
    pub shape_type: ShapeType,
    /// `[x, y, w, h]` in slide EMU with a top-left origin (none for notes).
    pub shape_box: Option<[i64; 4]>,
    /// The slide's `[width, height]` in EMU.
    pub slide_size: [i64; 2],
    /// 1-based paragraph in the shape's text (text shapes and notes).
    pub paragraph: Option<u32>,
    /// 1-based row of a table shape.
    pub table_row: Option<u32>,
    /// The block is the slide's speaker notes.
    pub notes: bool,
    /// How the shape is turned on the slide (its own `a:xfrm`: clockwise degrees and mirror
    /// flips); its box is the unturned frame, as PowerPoint stores it. `null`: not turned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<Turn>,
}

/// A shape's rotation and flips.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Turn {
    /// Clockwise, in degrees (`rot` / 60000).
    pub degrees: f64,
    pub flip_h: bool,
    pub flip_v: bool,
}

impl Turn {
    /// The CSS transform that turns the frame as the slide shows it (about its centre): the
    /// rotation only — a flip leaves the frame where it is, and would mirror the text laid in it.
    pub fn css(&self) -> Option<String> {
        (self.degrees != 0.0).then(|| format!("rotate({}deg)", (self.degrees * 1000.0).round() / 1000.0))
    }
}

impl SlidePlace {
    /// The shape's box as a fraction of the slide: `[x0, y0, x1, y1]` in 0..1.
    pub fn box_fraction(&self) -> Option<[f64; 4]> {
        let [x, y, w, h] = self.shape_box?;
        let (sw, sh) = (self.slide_size[0].max(1) as f64, self.slide_size[1].max(1) as f64);
        let c = |v: f64| v.clamp(0.0, 1.0);
        Some([c(x as f64 / sw), c(y as f64 / sh), c((x + w) as f64 / sw), c((y + h) as f64 / sh)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::{Place, PlacePart};

    #[test]
    fn a_slide_is_cited_as_a_slide_and_its_box_as_a_fraction() {
        let p = SlidePlace {
            slide: 2,
            shape_id: 3,
            shape_name: "Content Placeholder 2".into(),
            shape_type: ShapeType::Placeholder,
            shape_box: Some([914_400, 685_800, 4_572_000, 1_371_600]),
            slide_size: [9_144_000, 6_858_000],
            paragraph: Some(2),
            table_row: None,
            notes: false,
            turn: None,
        };
        assert_eq!(p.box_fraction(), Some([0.1, 0.1, 0.6, 0.3]));
        let path = vec!["Budget".to_string()];
        let place = Place {
            kind: Some("slides"),
            page: Some(2),
            first_line: None,
            line_range: None,
            section: Some("Budget"),
            section_path: &path,
            para_id: None,
            fingerprint: None,
            ordinal: Some(2),
            sheet: None,
            cell_range: None,
        };
        assert_eq!(place.citation_label().as_deref(), Some("slide 2"));
        assert_eq!(place.parts()[0], PlacePart::Slide(2));
        let json = serde_json::to_value(&p).unwrap();
        assert_eq!(json["shapeType"], "placeholder");
        assert_eq!(json["shapeBox"], serde_json::json!([914_400, 685_800, 4_572_000, 1_371_600]));
    }
}
