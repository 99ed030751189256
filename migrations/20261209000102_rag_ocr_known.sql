-- why: issue 39 item 8. The knowledge-RAG status must say `processed` only when it knows
-- whether the OCR text we sent reached LightRAG. The sync records the state and the check in
-- one statement; this makes the database refuse anything else: a document whose text holds
-- OCR text (`ocr_expected`) is `processed` only with `ocr_text_exposed` set. Rows that broke
-- the rule go back to `processing`: the next sync pass follows their track again and records
-- both. (The owner runs this; forced RLS is lifted for the one update, in this transaction.)
alter table rag_doc no force row level security;
update rag_doc set status = 'processing', updated_at = now()
    where status = 'processed' and ocr_expected and ocr_text_exposed is null;
alter table rag_doc force row level security;
alter table rag_doc add constraint rag_doc_processed_knows_ocr
    check (status <> 'processed' or not ocr_expected or ocr_text_exposed is not null);
