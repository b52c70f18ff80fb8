// The check that docs/configuration.md and each service's configuration schema agree: every
// variable, its default and its description, so that the doc cannot drift from the code.
import { existsSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'

/** The services docs/configuration.md documents; a section of variables names one of them, or both. */
export const DOCUMENTED_SERVICES = ['forge-aggregator', 'items-list'] as const

/** What the check reads of a configuration schema: a TypeBox `Type.Object`'s properties. */
export interface VariableSchemas {
  properties: Record<string, { default?: string | number | boolean; description?: string }>
}

/** One row of a table of variables: its name, and its default and description cells as written. */
export interface DocumentedVariable {
  name: string
  section: string
  defaultCell: string
  description: string
}

/**
 * The rows of every table of variables in `markdown` that apply to `service`: those under a `##`
 * heading that names the service or says "both services". A table under a heading that names
 * neither is an error, so that no variable can sit in the doc where no check reads it.
 */
export function documentedVariables(markdown: string, service: string): DocumentedVariable[] {
  const rows: DocumentedVariable[] = []
  let section = ''
  for (const line of markdown.split('\n')) {
    const heading = /^## (.+)$/.exec(line)
    if (heading) section = heading[1]!
    const row = /^\| `([A-Z0-9_]+)` \|(.*)$/.exec(line)
    if (!row) continue
    const appliesTo = sectionServices(section)
    if (appliesTo.length === 0) throw new Error(`docs/configuration.md: \`${row[1]}\` is under "${section}", which names no service`)
    if (!appliesTo.includes(service)) continue
    // A row cut short has empty cells: its default and description then differ from the schema's.
    const [defaultCell = '', description = ''] = row[2]!.split(' | ').map((cell) => cell.replace(/\|$/, '').trim())
    rows.push({ name: row[1]!, section, defaultCell, description })
  }
  return rows
}

function sectionServices(heading: string): string[] {
  if (/both services/i.test(heading)) return [...DOCUMENTED_SERVICES]
  return DOCUMENTED_SERVICES.filter((name) => heading.includes(name))
}

/** A description cell as plain text: code spans lose their backticks, runs of spaces are one space. */
function plainText(cell: string): string {
  return cell.replaceAll('`', '').replace(/\s+/g, ' ').trim()
}

/**
 * What differs between `schema` and the rows of `markdown` for `service`, one line each (empty when
 * they agree): a variable the schema reads and the doc lacks, or the doc lists twice; one the doc
 * lists and the schema lacks; a default other than the schema's (a default cell starts with the
 * default as a code span, or with "unset" where the schema has none); a description other than
 * the schema's, or none in the schema.
 */
export function configurationDocProblems(schema: VariableSchemas, service: string, markdown: string): string[] {
  const problems: string[] = []
  const rows = documentedVariables(markdown, service)
  for (const [name, property] of Object.entries(schema.properties)) {
    const found = rows.filter((row) => row.name === name)
    const [row] = found
    if (row === undefined) {
      problems.push(`${name}: not in docs/configuration.md`)
      continue
    }
    if (found.length > 1) problems.push(`${name}: listed ${found.length} times (${found.map((each) => each.section).join('; ')})`)
    const expected = property.default === undefined ? 'unset' : `\`${String(property.default)}\``
    if (!row.defaultCell.startsWith(expected)) problems.push(`${name}: default is ${expected} in the schema, "${row.defaultCell}" in the doc`)
    if (property.description === undefined) problems.push(`${name}: no description in the schema`)
    else if (plainText(row.description) !== property.description) {
      problems.push(`${name}: the schema's description is "${property.description}", the doc's "${plainText(row.description)}"`)
    }
  }
  for (const row of rows) {
    if (!(row.name in schema.properties)) problems.push(`${row.name}: in docs/configuration.md ("${row.section}"), not in the schema`)
  }
  return problems
}

/** docs/configuration.md, found from `from` upwards (a Stryker sandbox inside a package too). */
export function readConfigurationDoc(from: string = process.cwd()): string {
  let dir = from
  while (!existsSync(join(dir, 'pnpm-workspace.yaml'))) {
    const parent = dirname(dir)
    if (parent === dir) throw new Error(`no pnpm-workspace.yaml above ${from}`)
    dir = parent
  }
  return readFileSync(join(dir, 'docs', 'configuration.md'), 'utf8')
}
