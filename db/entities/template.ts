import { EntitySchema } from '@mikro-orm/core';

export interface TemplateVariable {
  key: string;
  type: 'string' | 'number' | 'boolean';
  fallback?: string | number | boolean;
}

/** A template and its one draft, the only part that changes; published versions are TemplateVersion rows. */
export class Template {
  id!: string;
  organizationId!: string;
  name!: string;
  /** Optional second name for sends and paths; unique per organization. */
  slug: string | null = null;
  subject!: string;
  html: string | null = null;
  text: string | null = null;
  variables: TemplateVariable[] = [];
  /** Bumped by every draft edit, so publishing freezes exactly the draft it checked. */
  draftRevision = 0;
  /** The highest published version number; 0 before the first publish. */
  latestVersion = 0;
  createdAt: Date = new Date();
  updatedAt: Date = new Date();
}

/** A published version: immutable, what sends render. */
export class TemplateVersion {
  id!: string;
  templateId!: string;
  version!: number;
  subject!: string;
  html: string | null = null;
  text: string | null = null;
  variables: TemplateVariable[] = [];
  publishedAt!: Date;
}

export const TemplateSchema = new EntitySchema<Template>({
  class: Template,
  tableName: 'templates',
  properties: {
    id: { type: 'uuid', primary: true },
    organizationId: { type: 'uuid' },
    name: { type: 'text' },
    slug: { type: 'text', nullable: true },
    subject: { type: 'text' },
    html: { type: 'text', nullable: true },
    text: { type: 'text', nullable: true },
    variables: { type: 'json' },
    draftRevision: { type: 'integer' },
    latestVersion: { type: 'integer' },
    createdAt: { type: 'Date', columnType: 'timestamptz' },
    updatedAt: { type: 'Date', columnType: 'timestamptz' },
  },
});

export const TemplateVersionSchema = new EntitySchema<TemplateVersion>({
  class: TemplateVersion,
  tableName: 'template_versions',
  properties: {
    id: { type: 'uuid', primary: true },
    templateId: { type: 'uuid' },
    version: { type: 'integer' },
    subject: { type: 'text' },
    html: { type: 'text', nullable: true },
    text: { type: 'text', nullable: true },
    variables: { type: 'json' },
    publishedAt: { type: 'Date', columnType: 'timestamptz' },
  },
});
