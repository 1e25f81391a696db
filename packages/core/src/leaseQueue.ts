/**
 * The in-flight claims of one idempotency middleware, in the order their lease renewals are due: a
 * doubly-linked list, so a claim joins at the end and leaves from anywhere at no cost beyond a few fields.
 * Every claim waits the same `every` ms (a third of the lease), so the order is the order they joined in;
 * a due time never moves before the one ahead of it, even if the clock steps back. Each edition's
 * middleware runs one fiber that sleeps until {@link LeaseQueue.first} is due and renews what
 * {@link LeaseQueue.takeDue} hands it (`internal/http/idempotencyLeases.ts`); this file knows no runtime.
 */

/** A claim's place in a {@link LeaseQueue}: each edition's lease extends it with what renews the claim. */
export class LeaseLink {
  prev: LeaseLink | undefined = undefined
  next: LeaseLink | undefined = undefined
  /** When its next renewal is due, in the clock's milliseconds. */
  due = 0
  /** Whether it waits in the list (not while its renewal runs, nor once it has ended). */
  listed = false
  /** The handler has ended: its claim is never renewed again. */
  ended = false
}

export class LeaseQueue<L extends LeaseLink> {
  private head: LeaseLink | undefined = undefined
  private tail: LeaseLink | undefined = undefined

  constructor(readonly every: number) {}

  /** The link due first, if any waits. */
  get first(): L | undefined {
    return this.head as L | undefined
  }

  /** Puts `link` at the end, due `every` after `now` (and not before the one ahead of it). */
  push(link: L, now: number): void {
    link.due = this.tail === undefined ? now + this.every : Math.max(now + this.every, this.tail.due)
    link.listed = true
    link.prev = this.tail
    link.next = undefined
    if (this.tail === undefined) this.head = link
    else this.tail.next = link
    this.tail = link
  }

  /** Takes `link` out of the list, if it is in it. */
  remove(link: L): void {
    if (!link.listed) return
    link.listed = false
    if (link.prev === undefined) this.head = link.next
    else link.prev.next = link.next
    if (link.next === undefined) this.tail = link.prev
    else link.next.prev = link.prev
    link.prev = link.next = undefined
  }

  /** Its handler has ended: `link` leaves the list and never joins it again (see {@link renewed}). */
  end(link: L): void {
    link.ended = true
    this.remove(link)
  }

  /** Takes out, and returns in order, the links due at `now`. */
  takeDue(now: number): Array<L> {
    const due: Array<L> = []
    while (this.head !== undefined && this.head.due <= now) {
      const link = this.head as L
      this.remove(link)
      due.push(link)
    }
    return due
  }

  /**
   * A renewal of `link` ended at `now`: it waits again if the store said the claim is still its own and its
   * handler has not ended meanwhile. Whether it joined the list.
   */
  renewed(link: L, owned: boolean, now: number): boolean {
    if (!owned || link.ended) return false
    this.push(link, now)
    return true
  }
}
