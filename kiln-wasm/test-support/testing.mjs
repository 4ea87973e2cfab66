// The test-only exports (check_direct, table_layout, dtype_bits), from the
// module build.sh builds for the tests alone (kiln-wasm/pkg-testing, feature
// `testing`: the shipped modules' code plus these; never packed).
import { readFileSync } from 'node:fs';
import { check_direct, dtype_bits, dtype_names, initSync, table_layout } from '../pkg-testing/kiln_testing.js';

initSync({ module: readFileSync(new URL('../pkg-testing/kiln_testing_bg.wasm', import.meta.url)) });

export { check_direct, dtype_bits, dtype_names, table_layout };
