//! A tensor's values as `f32` for `Tensor.toFloat32` and `dequantize` in
//! `js/directory.js`: the core's `kiln_nostd::dequant::Dequantizer` (spec
//! §11.1), the one implementation of the conversions and the scales. The
//! payload lives in JavaScript memory, so JavaScript copies it through a
//! fixed window and reads each piece's values back: wasm memory grows by the
//! window and its output, never with the tensor.

use kiln_nostd::dequant::{DequantError, Dequantizer, QuantParts};
use kiln_nostd::dtype::Width;
use kiln_nostd::DType;
use wasm_bindgen::prelude::*;

use crate::conv::{addr, u32_of, u64_of_f64, usize_sat};

/// Payload bytes per window (a multiple of 8, so every window starts on an element).
const WINDOW: usize = 64 * 1024;

/// The values of one tensor, a window of its payload at a time: JavaScript
/// copies bytes `at..at + n` of the payload to [`window_ptr`](Self::window_ptr),
/// calls [`run`](Self::run)`(at, n)` and reads that many values at
/// [`out_ptr`](Self::out_ptr); windows go in order, each [`window_len`](Self::window_len)
/// bytes but the last.
#[wasm_bindgen]
pub struct Values {
    dtype: DType,
    shape: Vec<u64>,
    quant: Option<Quant>,
    window: Vec<u8>,
    out: Vec<f32>,
}

/// The quantization, its scales owned (copied in once).
struct Quant {
    scale_dtype: DType,
    scales: Vec<u8>,
    axis: usize,
    group_size: u32,
    outer: Option<f32>,
}

impl Quant {
    fn parts(&self) -> QuantParts<'_> {
        let Quant { scale_dtype, ref scales, axis, group_size, outer } = *self;
        QuantParts { scale_dtype, scales, axis, group_size, outer }
    }
}

/// A refused tensor as the TypeError `toFloat32` and `dequantize` throw.
fn type_error(e: DequantError) -> JsValue {
    js_sys::TypeError::new(&e.to_string()).into()
}

#[wasm_bindgen]
impl Values {
    /// The values of a tensor of dtype code `dtype` and `shape` (JavaScript
    /// numbers), unquantized; [`quantized`](Self::quantized) adds its scales.
    /// Throws a TypeError for an opaque dtype (the core's refusal).
    #[wasm_bindgen(constructor)]
    pub fn new(dtype: u16, shape: &[f64]) -> Result<Values, JsValue> {
        let dtype = DType::from_code(dtype).unwrap_or(DType::Opaque(dtype));
        let shape: Vec<u64> = shape.iter().map(|&d| u64_of_f64(d)).collect();
        // The core's own refusals (opaque, too many elements), before any byte is copied.
        Dequantizer::from_parts(dtype, &shape, 0, &[], None).map_err(type_error)?;
        // Nibble dtypes: two values per byte.
        let per_byte = match dtype.width() {
            Width::Nibble => 2,
            _ => 1,
        };
        let out = WINDOW.saturating_mul(per_byte);
        Ok(Values { dtype, shape, quant: None, window: vec![0; WINDOW], out: vec![0.0; out] })
    }

    /// The tensor's quantization (spec §11.1): the scale tensor's dtype code
    /// and wire bytes, the quantized axis, the group size and, for scheme 2,
    /// the outer scale. Throws a TypeError for opaque scales.
    pub fn quantized(
        &mut self,
        scale_dtype: u16,
        scales: Vec<u8>,
        axis: u32,
        group_size: u32,
        outer: Option<f32>,
    ) -> Result<(), JsValue> {
        let scale_dtype = DType::from_code(scale_dtype).unwrap_or(DType::Opaque(scale_dtype));
        let axis = usize_sat(u64::from(axis));
        let quant = Quant { scale_dtype, scales, axis, group_size, outer };
        Dequantizer::from_parts(self.dtype, &self.shape, 0, &[], Some(quant.parts())).map_err(type_error)?;
        self.quant = Some(quant);
        Ok(())
    }

    /// Where the window is in wasm memory.
    pub fn window_ptr(&self) -> u32 {
        addr(self.window.as_ptr())
    }

    /// The window's length in bytes.
    pub fn window_len(&self) -> u32 {
        u32_of(self.window.len())
    }

    /// Where the values of the last [`run`](Self::run) are (f32s).
    pub fn out_ptr(&self) -> u32 {
        addr(self.out.as_ptr())
    }

    /// Computes the values whose bytes are the window's first `n`, which are
    /// payload bytes `at..at + n` (`at` a multiple of the window length);
    /// returns how many values are at [`out_ptr`](Self::out_ptr).
    pub fn run(&mut self, at: f64, n: u32) -> u32 {
        let at = usize_sat(u64_of_f64(at));
        let first = match self.dtype.width() {
            Width::Bytes(w) => at.checked_div(usize::from(w)),
            Width::Nibble => at.checked_mul(2),
            Width::Opaque => None,
        };
        let bytes = self.window.get(..usize_sat(u64::from(n))).unwrap_or(&self.window);
        let quant = self.quant.as_ref().map(Quant::parts);
        match (first, Dequantizer::from_parts(self.dtype, &self.shape, first.unwrap_or(0), bytes, quant)) {
            (Some(first), Ok(d)) => u32_of(d.fill(first, &mut self.out)),
            _ => 0,
        }
    }
}
