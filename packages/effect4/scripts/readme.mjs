// What scripts/examples.mjs and scripts/package.mjs read from the READMEs and guides: the install lines and how the
// first example is run. Plain Node, no dependency.

/** The fenced blocks of a markdown text, as `[match, lang, body]`. */
export const fencedBlocks = (text) => [...text.matchAll(/^```(\w+)\n([\s\S]*?)^```/gm)]

/**
 * The `npm i` / `npm install` lines of the ```sh blocks among `blocks`, comments dropped, in order. A line that names
 * `effect-resilience@effect3` installs the Effect 3 edition: packages/effect3/scripts/package.mjs checks it, so it is
 * left out here.
 */
export const installLines = (blocks) =>
  blocks.filter(([, lang]) => lang === "sh").flatMap(([, , body]) =>
    body.split("\n").map((line) => line.replace(/#.*$/, "").trim()).filter((line) =>
      /^npm (i|install) /.test(line) && !line.split(/\s+/).includes("effect-resilience@effect3")
    )
  )

/**
 * How a README says to run its example, from the prose before its first ```ts block: "save it as `<file>`",
 * "run `node …`" and "prints `<output>`". `undefined` when one of them is missing.
 */
export const exampleRun = (text) => {
  const fence = text.search(/^```ts$/m)
  const before = fence < 0 ? text : text.slice(0, fence)
  const file = /save\s+it\s+as\s+`([^`]+)`/i.exec(before)?.[1]
  const command = /\brun\s+`(node\s[^`]+)`/.exec(before)?.[1]
  const output = /\bprints\s+`([^`]+)`/.exec(before)?.[1]
  return file === undefined || command === undefined || output === undefined ? undefined : { file, command, output }
}
