// Progress reports, one rule for every loader (the stream loader,
// openRemote, RemoteDirectory/RemoteModel.load, loadToGPU):
// onProgress(received, total, { tensor, source }) at most once per
// PROGRESS_BYTES received or PROGRESS_MS elapsed, and always a final call
// with received === total. `tensor` is the name (or index) of the tensor the
// bytes belong to, null for the header and directory; `source` is 'network'
// or 'cache'.

/** Bytes between two progress calls, at most (unless PROGRESS_MS passed first). */
export const PROGRESS_BYTES = 64 * 1024;
/** Milliseconds between two progress calls, at most (unless PROGRESS_BYTES arrived first). */
export const PROGRESS_MS = 50;

const NETWORK = Object.freeze({ tensor: null, source: 'network' });
const now = () => (typeof performance !== 'undefined' ? performance.now() : Date.now());

/**
 * A throttled reporter over `onProgress` (null: every call is a no-op).
 * `add(bytes, info)` counts bytes received; `done(info)` makes the final call.
 */
export class Progress {
  /** @param {((received: number, total: number | null, info: {tensor: string | number | null, source: 'network' | 'cache'}) => void) | null | undefined} onProgress */
  constructor(onProgress, total = null) {
    this._cb = typeof onProgress === 'function' ? onProgress : null;
    this.total = total;
    this.received = 0;
    this._lastBytes = 0;
    this._lastTime = -Infinity;
    this._final = false;
    this._sources = 0; // bit 1: network bytes counted, bit 2: cache bytes
  }

  /** 'cache' when every byte counted so far came from the cache (and some did), else 'network': the final call's source. */
  get source() {
    return this._sources === 2 ? 'cache' : 'network';
  }

  /**
   * Counts `bytes` more; reports when 64 KiB arrived or 50 ms passed since the last report. `info` may be
   * a function returning it (called only when a report is made).
   */
  add(bytes, info = NETWORK) {
    this.received += bytes;
    if (bytes > 0) this._sources |= typeof info === 'object' && info?.source === 'cache' ? 2 : 1;
    if (this._cb === null) return;
    if (this.total !== null && this.received >= this.total) {
      this.done(info);
      return;
    }
    const t = now();
    if (this.received - this._lastBytes >= PROGRESS_BYTES || t - this._lastTime >= PROGRESS_MS) {
      this._lastBytes = this.received;
      this._lastTime = t;
      this._cb(this.received, this.total, typeof info === 'function' ? info() : info);
    }
  }

  /** True once the final call was made. */
  get final() {
    return this._final;
  }

  /** The final call (once): received === total (total set to received when it was unknown). */
  done(info = NETWORK) {
    if (this._cb === null || this._final) return;
    if (typeof info === 'function') info = info();
    this._final = true;
    if (this.total === null || this.total < this.received) this.total = this.received;
    this.received = this.total;
    this._cb(this.received, this.total, info);
  }
}
