import * as kiln from '../pkg/index.js';
import { formatStream, runStream } from '../bench/stream.mjs';
const s = await runStream(kiln, 1 << 30, { rounds: Number(process.argv[2] ?? 5), log: console.log });
console.log(formatStream(s));
