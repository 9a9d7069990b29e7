//! Markdown tables and number formatting shared by reports and run comparisons.
//!
//! GitHub-flavoured pipe tables, built row by row; cells are escaped (a `|` in a DUT name must
//! not break the table). Numbers are shown with four significant digits and an SI prefix
//! (`1.234 M`), enough to compare throughputs at a glance; the JSON keeps full precision.

/// Column alignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Text.
    Left,
    /// Numbers.
    Right,
}

/// A Markdown table under construction.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    header: Vec<(String, Align)>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers and alignments.
    pub fn new<S: Into<String>>(columns: impl IntoIterator<Item = (S, Align)>) -> Self {
        Self {
            header: columns.into_iter().map(|(h, a)| (h.into(), a)).collect(),
            rows: Vec::new(),
        }
    }

    /// Append a row; missing cells are left empty, extra cells dropped.
    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) -> &mut Self {
        let mut r: Vec<String> = cells.into_iter().map(Into::into).collect();
        r.resize(self.header.len(), String::new());
        self.rows.push(r);
        self
    }

    /// Number of rows (not counting the header).
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True if there are no rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The table as Markdown, ending in a newline.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let line = |cells: &mut dyn Iterator<Item = String>| {
            let mut l = String::from("|");
            for c in cells {
                l.push(' ');
                l.push_str(&c);
                l.push_str(" |");
            }
            l.push('\n');
            l
        };
        s += &line(&mut self.header.iter().map(|(h, _)| escape(h)));
        s += &line(&mut self.header.iter().map(|(_, a)| match a {
            Align::Left => "---".to_string(),
            Align::Right => "---:".to_string(),
        }));
        for r in &self.rows {
            s += &line(&mut r.iter().map(|c| escape(c)));
        }
        s
    }
}

fn escape(cell: &str) -> String {
    cell.replace('|', "\\|").replace('\n', " ")
}

/// `v` with 4 significant digits and an SI prefix: `14.88 M`, `999.0 k`, `12.00`.
pub fn si(v: f64) -> String {
    if !v.is_finite() {
        return v.to_string();
    }
    let (scaled, prefix) = match v.abs() {
        a if a >= 1e9 => (v / 1e9, " G"),
        a if a >= 1e6 => (v / 1e6, " M"),
        a if a >= 1e3 => (v / 1e3, " k"),
        _ => (v, ""),
    };
    let digits = match scaled.abs() {
        a if a >= 100.0 => 1,
        a if a >= 10.0 => 2,
        _ => 3,
    };
    format!("{scaled:.digits$}{prefix}")
}

/// An optional value through [`si`], "—" when absent.
pub fn si_opt(v: Option<f64>) -> String {
    v.map_or_else(|| "—".to_string(), si)
}

/// A ratio as `1.234×`.
pub fn ratio(v: f64) -> String {
    format!("{v:.3}×")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_markdown() {
        let mut t = Table::new([("DUT", Align::Left), ("rate", Align::Right)]);
        t.row(["vrhost", "1.000 M"]).row(["a|b"]);
        assert_eq!(t.len(), 2);
        assert_eq!(
            t.render(),
            "| DUT | rate |\n| --- | ---: |\n| vrhost | 1.000 M |\n| a\\|b |  |\n"
        );
    }

    #[test]
    fn si_prefixes() {
        assert_eq!(si(14_880_952.0), "14.88 M");
        assert_eq!(si(999_000.0), "999.0 k");
        assert_eq!(si(1_500.0), "1.500 k");
        assert_eq!(si(12.0), "12.00");
        assert_eq!(si(2.5e9), "2.500 G");
        assert_eq!(si(0.5), "0.500");
        assert_eq!(si_opt(None), "—");
        assert_eq!(ratio(1.5), "1.500×");
    }
}
