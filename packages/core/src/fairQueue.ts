/**
 * A waiting room shared fairly between partitions (clients, tenants): each partition's waiters are first in,
 * first out, and a freed slot goes to the partitions that are waiting in turn, round robin. So while several
 * partitions wait, each gets an equal share of the slots that free up, however many more requests one of them
 * sends; a partition alone in the queue gets every slot (nothing is held back for partitions that do not wait).
 *
 * The order of the partitions is the order of a `Map`: the first one is served next and moves to the end if it
 * still has waiters; a partition that starts waiting joins at the end. A full queue makes room by dropping the
 * newest waiter of its longest partition, so one partition cannot fill the queue and lock the others out.
 */
export class FairQueue<T> {
  private readonly partitions = new Map<string, Set<T>>()
  private count = 0

  /** Waiters in all partitions. */
  get size(): number {
    return this.count
  }

  /** Waiters of one partition. */
  waiting(partition: string): number {
    return this.partitions.get(partition)?.size ?? 0
  }

  push(partition: string, item: T): void {
    let waiters = this.partitions.get(partition)
    if (waiters === undefined) {
      waiters = new Set()
      this.partitions.set(partition, waiters)
    }
    waiters.add(item)
    this.count++
  }

  /** The next waiter, round robin over the partitions that wait; `undefined` when nobody waits. */
  shift(): T | undefined {
    return this.shiftWhere(() => true)
  }

  /**
   * The next waiter that `eligible` accepts: the partitions in turn, in each its oldest eligible waiter (a
   * partition with none keeps its turn). The partition served moves to the end. `undefined`: none eligible.
   */
  shiftWhere(eligible: (item: T) => boolean): T | undefined {
    for (const [partition, waiters] of this.partitions) {
      for (const item of waiters) {
        if (!eligible(item)) continue
        waiters.delete(item)
        this.count--
        this.partitions.delete(partition)
        if (waiters.size > 0) this.partitions.set(partition, waiters)
        return item
      }
    }
    return undefined
  }

  /** Removes a waiter that stopped waiting; `false` when it was not queued. Its partition keeps its turn. */
  delete(partition: string, item: T): boolean {
    const waiters = this.partitions.get(partition)
    if (waiters === undefined || !waiters.delete(item)) return false
    this.count--
    if (waiters.size === 0) this.partitions.delete(partition)
    return true
  }

  /**
   * Makes room for a waiter of `partition` in a queue that is full: removes and returns the newest waiter of
   * the partition with the most waiters, when that partition has more than `partition` would have with the
   * newcomer minus one (so the newcomer's partition ends with no more than it). `undefined`: the newcomer's
   * own partition is the longest; refuse the newcomer instead.
   */
  evictFor(partition: string): T | undefined {
    let longest: string | undefined
    let most = this.waiting(partition) + 1
    for (const [name, waiters] of this.partitions) {
      if (waiters.size > most) {
        longest = name
        most = waiters.size
      }
    }
    if (longest === undefined) return undefined
    let newest: T | undefined
    for (const item of this.partitions.get(longest)!) newest = item
    this.delete(longest, newest!)
    return newest
  }

  /** Every waiter, oldest partition turn first, and empties the queue. */
  drainAll(): Array<T> {
    const all: Array<T> = []
    for (;;) {
      const item = this.shift()
      if (item === undefined) return all
      all.push(item)
    }
  }
}
