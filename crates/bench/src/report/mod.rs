pub mod plot;
pub mod table;
