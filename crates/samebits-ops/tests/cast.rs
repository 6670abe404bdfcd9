//! Cast family: the conversion rules of docs/contract.md ("Cast"). Expected values are derived
//! by hand from those rules (IEEE round to nearest even, truncation, wrap-around).
mod common;
use common::*;
use half::{bf16, f16};
use samebits_ir::{Attribute, DType, Tensor};

fn cast(x: Tensor, to: i64) -> Result<Tensor, samebits_ops::OpError> {
    run1("Cast", &[x], &[("to", Attribute::Int(to))])
}

#[test]
fn float_to_int_truncates_saturates_and_maps_nan_to_zero() {
    let x = f32s(&[5], &[1.9, -1.9, 3e10, -3e10, f32::NAN]);
    let y = cast(x, 6).unwrap();
    assert_eq!(
        y.as_slice::<i32>().unwrap(),
        &[1, -1, i32::MAX, i32::MIN, 0]
    );
}

#[test]
fn int_to_int_wraps() {
    let x = Tensor::from_vec(vec![3], vec![300i32, -129, -1]).unwrap();
    assert_eq!(
        cast(x.clone(), 3).unwrap().as_slice::<i8>().unwrap(),
        &[44, 127, -1]
    );
    assert_eq!(
        cast(x, 2).unwrap().as_slice::<u8>().unwrap(),
        &[44, 127, 255]
    );
}

#[test]
fn f64_to_f16_rounds_once() {
    // 1 + 2^-11 + 2^-40 lies just above the midpoint between the f16 values 1 and 1 + 2^-10:
    // the correct result is 1 + 2^-10 (bits 0x3C01); rounding through f32 first would give 1.
    let v = 1.0 + 2f64.powi(-11) + 2f64.powi(-40);
    let y = cast(Tensor::from_vec(vec![1], vec![v]).unwrap(), 10).unwrap();
    assert_eq!(y.as_slice::<f16>().unwrap()[0].to_bits(), 0x3C01);
}

#[test]
fn i64_to_bf16_rounds_once() {
    // 2^60 + 2^52 + 1 is just above the midpoint between the bf16 neighbours 2^60 and
    // 2^60 + 2^53; converting through f64 (which drops the +1) would tie and round down.
    let v = (1i64 << 60) + (1i64 << 52) + 1;
    let y = cast(Tensor::from_vec(vec![1], vec![v]).unwrap(), 16).unwrap();
    assert_eq!(
        y.as_slice::<bf16>().unwrap()[0].to_f64(),
        ((1i64 << 60) + (1i64 << 53)) as f64
    );
}

#[test]
fn bool_conversions_use_zero_test_and_zero_one() {
    let x = f32s(&[4], &[0.0, -0.0, 2.5, f32::NAN]);
    let b = cast(x, 9).unwrap();
    assert_eq!(b.dtype(), DType::Bool);
    assert_eq!(b.as_bools().unwrap(), &[0, 0, 1, 1]);
    let back = cast(b, 11).unwrap();
    assert_eq!(back.as_slice::<f64>().unwrap(), &[0.0, 0.0, 1.0, 1.0]);
}

#[test]
fn strings_parse_and_print() {
    let s = Tensor::from_strings(
        vec![5],
        ["1.5", "-INF", "nan", "1e3", "+inf"]
            .map(String::from)
            .to_vec(),
    )
    .unwrap();
    let y = cast(s, 1).unwrap();
    let y = y.as_slice::<f32>().unwrap();
    assert_eq!(y[0], 1.5);
    assert_eq!(y[1], f32::NEG_INFINITY);
    assert!(y[2].is_nan());
    assert_eq!((y[3], y[4]), (1000.0, f32::INFINITY));
    // Spec: "100.5" to an integer may yield 100 (we truncate).
    let i = Tensor::from_strings(vec![2], vec!["100.5".into(), "-7".into()]).unwrap();
    assert_eq!(cast(i, 7).unwrap().as_slice::<i64>().unwrap(), &[100, -7]);
    let bad = Tensor::from_strings(vec![1], vec!["Hello".into()]).unwrap();
    let e = cast(bad, 1).unwrap_err();
    assert!(e.to_string().contains("\"Hello\""), "{e}");
    let printed = cast(f32s(&[4], &[0.1, 1e-5, f32::INFINITY, -2.0]), 8).unwrap();
    assert_eq!(
        printed.as_strings().unwrap(),
        &["0.1", "0.00001", "INF", "-2"]
    );
    let ints = cast(i64s(&[1], &[-5]), 8).unwrap();
    assert_eq!(ints.as_strings().unwrap(), &["-5"]);
}

#[test]
fn cast_like_takes_the_dtype_of_input_1() {
    let y = run1(
        "CastLike",
        &[
            f32s(&[2], &[2.7, -0.5]),
            Tensor::from_vec(vec![0], Vec::<i16>::new()).unwrap(),
        ],
        &[],
    )
    .unwrap();
    assert_eq!(y.as_slice::<i16>().unwrap(), &[2, 0]);
}

#[test]
fn complex_targets_are_unsupported_and_unknown_codes_invalid() {
    // 14 is ONNX's COMPLEX64, which samebits does not implement.
    let e = cast(f32s(&[1], &[1.0]), 14).unwrap_err();
    assert!(e.is_unsupported(), "{e}");
    let e = cast(f32s(&[1], &[1.0]), 99).unwrap_err();
    assert!(!e.is_unsupported() && e.to_string().contains("99"), "{e}");
}

#[test]
fn bitcast_reinterprets_bytes_of_the_same_width() {
    // 1.0f32 is 0x3f800000; -1i32 read as f32 is a NaN with all bits set.
    let y = run1(
        "BitCast",
        &[f32s(&[2], &[1.0, -0.0])],
        &[("to", Attribute::Int(6))],
    )
    .unwrap();
    assert_eq!(y.as_slice::<i32>().unwrap(), &[0x3f80_0000, i32::MIN]);
    let y = run1(
        "BitCast",
        &[Tensor::from_vec(vec![1], vec![200u8]).unwrap()],
        &[("to", Attribute::Int(3))],
    )
    .unwrap();
    // 200 = 0xc8, as i8: 200 - 256 = -56.
    assert_eq!(y.as_slice::<i8>().unwrap(), &[-56]);
    let e = run1(
        "BitCast",
        &[f32s(&[1], &[1.0])],
        &[("to", Attribute::Int(7))],
    )
    .unwrap_err();
    assert!(e.to_string().contains("one width"), "{e}");
}
