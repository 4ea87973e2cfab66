/* The example model in flash, 64-byte aligned (every payload offset is a
   multiple of 64, so f32 tensors can be viewed in place). The assembler
   finds the file through -I (see CMakeLists.txt). */
    .section .rodata.kiln_model, "a"
    .balign 64
    .global kiln_model
kiln_model:
    .incbin "digits-mlp.kiln"
    .global kiln_model_end
kiln_model_end:
    .section .note.GNU-stack, "", %progbits
