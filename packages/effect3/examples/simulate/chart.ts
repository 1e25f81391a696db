/**
 * A small line chart written as SVG text: title, labelled axes with ticks and grid lines, one polyline
 * with point markers per series, and a legend. No chart library; the output is deterministic.
 */

export interface Series {
  readonly label: string
  readonly color: string
  /** An SVG `stroke-dasharray`, e.g. `"6 4"`; solid when absent. */
  readonly dash?: string
  readonly points: ReadonlyArray<readonly [x: number, y: number]>
}

export interface ChartOptions {
  readonly title: string
  readonly subtitle?: string
  readonly xLabel: string
  readonly yLabel: string
  /** `log` spaces the y axis by powers of ten (ticks at 1, 2, 5 × 10^k); every y must then be > 0. */
  readonly yScale?: "linear" | "log"
  readonly series: ReadonlyArray<Series>
}

const width = 800
const height = 480
const margin = { top: 72, right: 200, bottom: 60, left: 80 }
const plotWidth = width - margin.left - margin.right
const plotHeight = height - margin.top - margin.bottom

export const escapeXml = (text: string): string =>
  text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;")

/** 1234567.5 → "1,234,567.5"; rounded to 12 significant digits. */
export const formatNumber = (x: number): string => {
  const [whole, fraction] = String(Number(x.toPrecision(12))).split(".")
  const grouped = whole!.replace(/\B(?=(\d{3})+(?!\d))/g, ",")
  return fraction === undefined ? grouped : `${grouped}.${fraction}`
}

/** A "nice" step (1, 2 or 5 × 10^k) giving about `count` intervals over `span`. */
const niceStep = (span: number, count: number): number => {
  const raw = span / count
  const magnitude = 10 ** Math.floor(Math.log10(raw))
  const residual = raw / magnitude
  return (residual <= 1 ? 1 : residual <= 2 ? 2 : residual <= 5 ? 5 : 10) * magnitude
}

const linearTicks = (max: number, count: number): { readonly top: number; readonly ticks: ReadonlyArray<number> } => {
  const step = niceStep(max > 0 ? max : 1, count)
  const top = Math.ceil((max > 0 ? max : 1) / step) * step
  const ticks: Array<number> = []
  for (let i = 0; i * step <= top * (1 + 1e-9); i++) ticks.push(Number((i * step).toPrecision(12)))
  return { top, ticks }
}

/** 1, 2, 5 × 10^k values from the largest ≤ min to the smallest ≥ max. */
const logTicks = (min: number, max: number): ReadonlyArray<number> => {
  const ticks: Array<number> = []
  for (let k = Math.floor(Math.log10(min)) - 1; k <= Math.ceil(Math.log10(max)); k++) {
    for (const m of [1, 2, 5]) ticks.push(Number((m * 10 ** k).toPrecision(12)))
  }
  const low = ticks.filter((t) => t <= min).at(-1) ?? ticks[0]!
  const high = ticks.find((t) => t >= max) ?? ticks.at(-1)!
  return ticks.filter((t) => t >= low && t <= high)
}

const f1 = (x: number) => String(Math.round(x * 10) / 10)

export const lineChart = (options: ChartOptions): string => {
  const all = options.series.flatMap((s) => s.points)
  const xMax = Math.max(...all.map(([x]) => x))
  const yValues = all.map(([, y]) => y)
  const x = linearTicks(xMax, 10)
  const sx = (v: number) => margin.left + (v / x.top) * plotWidth
  let yTicks: ReadonlyArray<number>
  let sy: (v: number) => number
  if (options.yScale === "log") {
    if (yValues.some((v) => !(v > 0))) throw new Error("lineChart: a log scale needs positive values")
    yTicks = logTicks(Math.min(...yValues), Math.max(...yValues))
    const lo = Math.log10(yTicks[0]!)
    const hi = Math.log10(yTicks.at(-1)!)
    sy = (v) => margin.top + plotHeight - ((Math.log10(v) - lo) / (hi - lo || 1)) * plotHeight
  } else {
    const y = linearTicks(Math.max(...yValues), 8)
    yTicks = y.ticks
    sy = (v) => margin.top + plotHeight - (v / y.top) * plotHeight
  }

  const out: Array<string> = []
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}"` +
      ` font-family="system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif" font-size="13">`,
    `<title>${escapeXml(options.title)}</title>`,
    `<rect width="${width}" height="${height}" fill="#ffffff"/>`,
    `<text x="${margin.left}" y="28" font-size="18" font-weight="600" fill="#1a1a1a">${escapeXml(options.title)}</text>`
  )
  if (options.subtitle !== undefined) {
    out.push(`<text x="${margin.left}" y="50" fill="#555555">${escapeXml(options.subtitle)}</text>`)
  }

  // grid and ticks
  out.push(`<g stroke="#e3e3e3" stroke-width="1">`)
  for (const t of yTicks) {
    out.push(`<line x1="${margin.left}" x2="${margin.left + plotWidth}" y1="${f1(sy(t))}" y2="${f1(sy(t))}"/>`)
  }
  for (const t of x.ticks) {
    out.push(`<line x1="${f1(sx(t))}" x2="${f1(sx(t))}" y1="${margin.top}" y2="${margin.top + plotHeight}"/>`)
  }
  out.push(`</g>`)
  out.push(`<g fill="#333333" font-size="12">`)
  for (const t of yTicks) {
    out.push(`<text x="${margin.left - 8}" y="${f1(sy(t) + 4)}" text-anchor="end">${formatNumber(t)}</text>`)
  }
  for (const t of x.ticks) {
    out.push(
      `<text x="${f1(sx(t))}" y="${margin.top + plotHeight + 18}" text-anchor="middle">${formatNumber(t)}</text>`
    )
  }
  out.push(`</g>`)
  out.push(
    `<rect x="${margin.left}" y="${margin.top}" width="${plotWidth}" height="${plotHeight}" fill="none" stroke="#333333"/>`,
    `<text x="${margin.left + plotWidth / 2}" y="${height - 16}" text-anchor="middle" fill="#1a1a1a">${
      escapeXml(options.xLabel)
    }</text>`,
    `<text transform="translate(20 ${margin.top + plotHeight / 2}) rotate(-90)" text-anchor="middle" fill="#1a1a1a">${
      escapeXml(options.yLabel)
    }</text>`
  )

  // one line per series, markers on the data points; later series are drawn on top
  for (const s of options.series) {
    const points = s.points.map(([px, py]) => `${f1(sx(px))},${f1(sy(py))}`)
    const dash = s.dash === undefined ? "" : ` stroke-dasharray="${s.dash}"`
    out.push(`<g>`)
    out.push(`<polyline fill="none" stroke="${s.color}" stroke-width="2.25"${dash} points="${points.join(" ")}"/>`)
    out.push(`<g fill="${s.color}">`)
    for (const p of points) {
      const [cx, cy] = p.split(",")
      out.push(`<circle cx="${cx}" cy="${cy}" r="2.75"/>`)
    }
    out.push(`</g>`)
    out.push(`</g>`)
  }

  // legend, right of the plot
  const lx = margin.left + plotWidth + 20
  out.push(`<g class="legend">`)
  options.series.forEach((s, i) => {
    const ly = margin.top + 12 + i * 24
    const dash = s.dash === undefined ? "" : ` stroke-dasharray="${s.dash}"`
    out.push(
      `<line x1="${lx}" x2="${lx + 28}" y1="${ly}" y2="${ly}" stroke="${s.color}" stroke-width="2.25"${dash}/>`,
      `<circle cx="${lx + 14}" cy="${ly}" r="2.75" fill="${s.color}"/>`,
      `<text x="${lx + 36}" y="${ly + 4}" fill="#1a1a1a">${escapeXml(s.label)}</text>`
    )
  })
  out.push(`</g>`)
  out.push(`</svg>`)
  return out.join("\n") + "\n"
}
