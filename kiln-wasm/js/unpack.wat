;; The decoder of the embedded module's text (wasm/kiln_full_inline.js), run
;; by bytesOf in modules.js; build.sh assembles it (binaryen's wasm-as) into
;; the package's modules.js. A JS loop over the ~186,000 characters ran in
;; V8's interpreter at import and was the largest part of the default entry's
;; import after the JS itself (docs/performance.md); this loop runs compiled.
;;
;; Memory holds the text's characters, one byte each (all are ASCII), from
;; offset 0; `u(len)` writes the module's bytes over them from offset 0 (the
;; output never passes the input: each byte takes one or two characters) and
;; returns how many: character c below 0x7e is byte c, 0x7e then c is byte
;; c + 0x80, 0x7f then c is byte c.
(module
  (import "k" "m" (memory 1))
  (func (export "u") (param $len i32) (result i32)
    (local $i i32) (local $n i32) (local $c i32)
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $len)))
        (local.set $c (i32.load8_u (local.get $i)))
        (if (i32.ge_u (local.get $c) (i32.const 0x7e))
          (then
            (local.set $i (i32.add (local.get $i) (i32.const 1)))
            ;; 0x7e adds 0x80; 0x7f adds nothing.
            (local.set $c
              (i32.add (i32.load8_u (local.get $i))
                (i32.shl (i32.eq (local.get $c) (i32.const 0x7e)) (i32.const 7))))))
        (i32.store8 (local.get $n) (local.get $c))
        (local.set $n (i32.add (local.get $n) (i32.const 1)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (local.get $n)))
