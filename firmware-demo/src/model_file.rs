//! Step 8: the model-file form of the example (frame, metadata, then the
//! same directory), read from flash by content.

use cortex_m_semihosting::hprintln;
use kiln_nostd::{directory::NameIndex, ErrorCode};

use crate::checks::Checks;
use crate::model::{evaluate, load, Fc1, Pool};
use crate::{EXPECT_F32_CORRECT, MODEL_FILE, SCRATCH_SLOTS};

/// Opens the model-file form of the example from flash by content (as any
/// reader without a type does), prints its metadata and runs it in place.
pub fn model_file(chk: &mut Checks) {
    let file: &'static [u8] = &MODEL_FILE.0;
    hprintln!("model file: digits-mlp.model.kiln, {} bytes in flash", file.len());
    chk.expect(kiln_model::is_model_file(file), "the model file is told apart by content");
    let (metadata, dir) = match kiln_model::parse_any(file) {
        Ok((Some(m), dir)) => (m, dir),
        Ok((None, _)) | Err(_) => {
            chk.expect(false, "the model file parses as a model file");
            return;
        }
    };
    for (k, v) in metadata.iter() {
        hprintln!("  {} = {}", k, v);
    }
    chk.expect(metadata.get("license").is_some() && metadata.padding() > 0, "metadata shown, padding hidden");
    let mut scratch = [0u32; SCRATCH_SLOTS];
    let index = NameIndex::build(dir, &mut scratch);
    // Everything in place: the payload region is 4 KiB aligned in the file.
    let mut none: [f32; 0] = [];
    let mut pool = Pool(&mut none[..]);
    match load(&index, &mut pool, false) {
        Ok(m) => {
            let run = evaluate(&m, &Fc1::F32(m.net.w1), false);
            hprintln!("  f32 accuracy from the model file: {}/{} (every tensor in place)", run.correct, run.n);
            chk.expect(m.all_in_place && run.correct == EXPECT_F32_CORRECT, "the model file runs in place, 32/32");
        }
        Err(e) => {
            chk.expect(false, e);
        }
    }
    // One byte of damage in the metadata: the Frozen reader's error, at that byte.
    let key_len_at = kiln_nostd::frozen::FRAME_LEN + 4;
    let mut bad = [0u8; 64];
    if let Some(head) = file.get(..64) {
        bad.copy_from_slice(head);
    }
    bad[key_len_at] = 0xff;
    let e = kiln_model::parse_any(&bad).err();
    hprintln!("  damaged metadata: {}", e.map_or(0, |e| e.offset()));
    chk.expect(
        e.is_some_and(|e| e.code() == ErrorCode::Eof && e.offset() == key_len_at),
        "damaged metadata is EOF at its length word",
    );
}
