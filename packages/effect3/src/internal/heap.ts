/** A binary min-heap ordered by `at`: O(log n) push and pop, O(1) peek. */
export class MinHeap<A extends { readonly at: number }> {
  private readonly items: Array<A> = []

  get size(): number {
    return this.items.length
  }

  peek(): A | undefined {
    return this.items[0]
  }

  push(item: A): void {
    const items = this.items
    items.push(item)
    let i = items.length - 1
    while (i > 0) {
      const parent = (i - 1) >> 1
      if (items[parent]!.at <= item.at) break
      items[i] = items[parent]!
      i = parent
    }
    items[i] = item
  }

  pop(): A | undefined {
    const items = this.items
    const top = items[0]
    const last = items.pop()
    if (top === undefined || last === undefined || items.length === 0) return top
    let i = 0
    for (;;) {
      const left = 2 * i + 1
      if (left >= items.length) break
      const right = left + 1
      const child = right < items.length && items[right]!.at < items[left]!.at ? right : left
      if (items[child]!.at >= last.at) break
      items[i] = items[child]!
      i = child
    }
    items[i] = last
    return top
  }
}
