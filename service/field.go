package service

// Field types: the service's, as /describe names them, and sepipe's own
// for the collections' inferred fields. One list for the client, the
// schemas and the decoder.
const (
	TypeInt      = "int"
	TypeFloat    = "float"
	TypePercent  = "percent"
	TypeString   = "string"
	TypePicklist = "picklist"
	TypeDate     = "date"

	// Types of the collections' fields (themes, assets, webhook
	// subscriptions and logs), which sepipe infers from their items; never
	// accepted from a describe.
	TypeBool = "boolean"
	TypeJSON = "json" // JSON text; a JSON column in DuckDB
)

// Field describes one field of a report object.
type Field struct {
	ID          string
	DisplayName string
	Type        string   // as the service wrote it: int, picklist, string, float, percent, date
	Options     []string // allowed values of a picklist field
	// Path is set on a field sepipe found nested in a collection's items:
	// the member names from the item down to the value (ID then joins
	// them with "__"). Empty for a top-level field.
	Path []string `json:",omitempty"`
}
