/**
 * Group commit for a store's writes: operations that arrive while the store's statements are in flight wait for
 * the next one and go together, as one statement. A store sends at once when nothing of its kind is in flight
 * (one operation alone waits only for the end of its tick), and under load each statement takes everything that
 * queued meanwhile, so statements per operation fall as the load rises, with no timer and no added wait beyond
 * the statement in flight.
 *
 * Pure bookkeeping (no effect system): the editions' stores start the statements and resume the callers.
 */

/** One operation waiting for a statement; `key` names the row it writes (two of one row never share one). */
export interface Member {
  readonly key: string
}

export class Batches<M extends Member> {
  private pending: Array<M> = []
  private inFlight = 0
  private scheduled = false

  /**
   * @param maxInFlight statements of this kind sent and not answered, at most
   * @param maxWidth operations in one statement, at most
   */
  constructor(readonly maxInFlight: number, readonly maxWidth: number) {}

  /** Queues `member`. True when the caller is to schedule {@link next} (once, at the end of its tick). */
  add(member: M): boolean {
    this.pending.push(member)
    if (this.scheduled || this.inFlight >= this.maxInFlight) return false
    this.scheduled = true
    return true
  }

  /** Takes `member` out of the queue, when it is still there (its caller left before it was sent). */
  remove(member: M): void {
    const at = this.pending.indexOf(member)
    if (at >= 0) this.pending.splice(at, 1)
  }

  /**
   * The next statement's operations, oldest first, and counts it in flight; `undefined` when none may be sent
   * now (nothing queued, or `maxInFlight` in flight). A second operation on a row already taken waits for a later
   * statement: one statement writes each row at most once.
   */
  next(): ReadonlyArray<M> | undefined {
    this.scheduled = false
    if (this.pending.length === 0 || this.inFlight >= this.maxInFlight) return undefined
    const taken: Array<M> = []
    const keys = new Set<string>()
    const left: Array<M> = []
    for (const member of this.pending) {
      if (taken.length < this.maxWidth && !keys.has(member.key)) {
        keys.add(member.key)
        taken.push(member)
      } else {
        left.push(member)
      }
    }
    this.pending = left
    this.inFlight++
    return taken
  }

  /** A statement from {@link next} was answered (or failed): call {@link next} again for what queued meanwhile. */
  done(): void {
    this.inFlight--
  }

  /** Operations queued and not yet sent. */
  get queued(): number {
    return this.pending.length
  }
}
