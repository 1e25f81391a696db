/**
 * The timers of the storm's virtual clock (engine.ts, in either edition): a binary heap by time, then by the order
 * they were set. No Effect here.
 */
export interface Timer {
  readonly at: number
  readonly seq: number
  /** Cleared to cancel the timer. */
  fire: (() => void) | undefined
}

const before = (a: Timer, b: Timer) => a.at < b.at || (a.at === b.at && a.seq < b.seq)

export class TimerHeap {
  private seq = 0
  private readonly heap: Array<Timer> = []

  /** Sets a timer at `at` (timers at the same instant come out in the order they were set). */
  push(at: number, fire: () => void): Timer {
    const timer: Timer = { at, seq: this.seq++, fire }
    const heap = this.heap
    let i = heap.push(timer) - 1
    while (i > 0) {
      const parent = (i - 1) >> 1
      if (!before(timer, heap[parent]!)) break
      heap[i] = heap[parent]!
      i = parent
    }
    heap[i] = timer
    return timer
  }

  /** Takes out the earliest timer that was not cancelled; `undefined` when none is left. */
  popLive(): Timer | undefined {
    let timer = this.pop()
    while (timer !== undefined && timer.fire === undefined) timer = this.pop()
    return timer
  }

  private pop(): Timer | undefined {
    const heap = this.heap
    const top = heap[0]
    const last = heap.pop()
    if (top === undefined || last === undefined || heap.length === 0) return top
    let i = 0
    for (;;) {
      const left = 2 * i + 1
      if (left >= heap.length) break
      const right = left + 1
      const child = right < heap.length && before(heap[right]!, heap[left]!) ? right : left
      if (!before(heap[child]!, last)) break
      heap[i] = heap[child]!
      i = child
    }
    heap[i] = last
    return top
  }
}
