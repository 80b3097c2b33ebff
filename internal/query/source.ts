// What the read side reads through: a statement runner and a source of connections (a pg
// Pool, or one lent under a request's budget, ./budget.ts, or read admission, ./admission.ts).
import type pg from 'pg';

/** What a pg Pool, PoolClient or Client offers for running one statement. */
export interface Queryable {
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(
    text: string,
    values?: unknown[],
  ): Promise<pg.QueryResult<R>>;
}

/** What a pg Pool offers: a dedicated connection for a transaction. */
export interface ConnectionSource {
  connect(): Promise<pg.PoolClient>;
}
