/**
 * Which of a context's streams a new request cancels. A stream holds one of its context's
 * sequences, and advances only while it is read; while its consumer has not asked for the next
 * piece it is "paused", and a request made on the context meanwhile would wait for it forever if
 * the consumer never comes back. So a new request cancels the paused streams it would wait for:
 * work that needs the whole context (clear, embed, warm-up, sessions, benchmarks) waits for all
 * of them; a generation waits only for a free sequence, so while paused streams hold every
 * sequence it cancels the oldest ones until one is free.
 */
export class PausedStreams {
  /** Cancel functions of the paused streams, oldest first. */
  private readonly paused = new Set<() => void>();

  /** A stream pauses at a piece: `cancel` stops it. */
  pause(cancel: () => void): void {
    this.paused.add(cancel);
  }

  /** The stream paused with `cancel` is read again (or ended). */
  resume(cancel: () => void): void {
    this.paused.delete(cancel);
  }

  /** How many streams are paused. */
  get size(): number {
    return this.paused.size;
  }

  /** Before work that needs the whole context: cancel every paused stream. */
  preemptAll(): void {
    for (const cancel of this.paused) {
      cancel();
    }
    this.paused.clear();
  }

  /**
   * Before a generation on a context of `sequences` sequences: while paused streams hold every
   * sequence, cancel the oldest of them.
   */
  preemptFor(sequences: number): void {
    for (const cancel of this.paused) {
      if (this.paused.size < sequences) {
        break;
      }
      cancel();
      this.paused.delete(cancel);
    }
  }
}
