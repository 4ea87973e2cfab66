// The npm front end of the cross-front-end verdict test (scripts/verdicts/verdicts.py): one JSON
// line per call and file. Arguments: the package's entry (pkg/index.js) and {name: path} as JSON.
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

const kiln = await import(pathToFileURL(process.argv[2]).href);
const files = JSON.parse(process.argv[3]);

function failed(e) {
  if (!(e instanceof kiln.KilnError)) throw e;
  return { ok: false, code: e.code, offset: e.offset };
}

// [row's call, given a path (a manifest then opens its shards), the call, the row whose cells
// apply when not the call's own]
const calls = [
  // The front door: bytes go to parseModel, a Blob (a File's kind) to loadDirectory.
  ['open', false, async (bytes) => {
    const m = await kiln.open(bytes);
    return { ok: true, digests_checked: m.digestsVerified };
  }, 'parseModel'],
  ['open', false, async (bytes) => {
    const d = await kiln.open(new Blob([bytes]));
    return { ok: true, digests_checked: d.digestsVerified };
  }, 'DirectoryLoader'],
  ['parseModel', false, (bytes) => {
    const m = kiln.parseModel(bytes);
    return { ok: true, digests_checked: m.digestsVerified };
  }],
  ['parseDirectory', false, (bytes) => {
    const d = kiln.parseDirectory(bytes);
    return { ok: true, digests_checked: d.digestsVerified };
  }],
  // The row's first name; loadDirectory runs the same DirectoryLoader over a stream.
  ['DirectoryLoader', false, async (bytes) => {
    const d = await kiln.loadDirectory(new Blob([bytes]));
    return { ok: true, digests_checked: d.digestsVerified };
  }],
];

for (const [name, path] of Object.entries(files)) {
  const bytes = readFileSync(path);
  for (const [call, byPath, run, row] of calls) {
    let v;
    try { v = await run(bytes); } catch (e) { v = failed(e); }
    console.log(JSON.stringify({ call, row: row ?? call, by_path: byPath, file: name, ...v }));
  }
}
