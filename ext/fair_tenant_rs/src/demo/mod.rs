pub mod ideal;
