Extendido por todas partes Europa y Asia encima dunas de arena y brezo y acantilados costeros
La manera en qué una palabra o la expresión o la situación pueden ser interpretadas
Una base de datos que contiene una variedad ordenada de elementos (nombres o temas)
El equipo de visitar barrió la serie
Una cuenta con un corretaje de seguridades cuyas transacciones están resueltas en una base de dinero efectivo
La parte superior de un glaciar (allende el límite de nieve perpetua) dónde los turnos de nieve a hielo
Un sistema de lente compuesto que formas una imagen libre de aberración cromática
Claro a fluido blanquecino de dentro de un coco fresco
Una disposición alegre para ser que obliga
Flotador en la superficie de agua
Gastado de aguantar una hernia en sitio por presión
El dinero disponible para un cliente para tomar prestado
Alguien quién viaja a regiones sabidas pequeñas (especialmente para algún propósito científico)
La ley de crear escrito obra
No cierto a deber u obligación o promesas
He sido pensando todo el día y cogiendo en ninguna parte
Especie semiacuática y terrestre
El historiador alemán notado para su aproximación crítica a fuentes y para su historia de Roma (1776-1831)
Una ofrenda hecha como una expresión de gracias
Una llegada en tercer sitio (como en una raza)
Tuerca habiendo un avellano duro-la concha marrón utilizó gusta marfil de vegetal
La producción cítrica de Florida
Una naranja de medida mediana
No basado encima razón o evidencia
Su deferencia a sus deseos era muy halagando
Esperma de pez o esperma-glándula reproductiva llenada
Un muelle temprano
Una mención directa
La calidad de brillar con una luz reflejada brillante
Forma en arcilla, cera, etc
La rama del gobierno de Estados Unidos que es responsable para llevar fuera de las leyes
El capital de Gabón
Una experiencia formativa
Venido junto como en un grupo o rebaño
La mayoría es árboles sustanciales
Un péptido que contiene 10 a más de 100 aminoácidos
Un bote en qué galletas está mantenido (y a veces el dinero está escondido)
Ambas chicas son bastante
El mecanismo que consta de un sistema de cañas y palancas conectó delante ruedas de un vehículo de motor
Resistente a magnetización
Orden de palabra normal
Tomamos el niño insultado fuera de sus padres
Una ladera suave
Una decoloración causada por sangre
Una ciudad en Iowa central del este
El uso de palabrasdeclase cerrada en vez de inflexiones: p. ej., `el padre de la novia' en vez de `la novia' padre'
Corresponde al tobillo humano
Apoyo más bajo de una estructura
Reducido a una escala microscópica
Tomó su escaño en la fase
Una manera de hacer o ser
Contracción muscular que causas la vagina para cerrar
Cogí llevado fuera cuándo vi el hombre muerto y yo empezaron para llorar
Tratamiento bestial de prisioneros
Un rígido agudo-proceso de planta apuntada
(De matrimonios) ilícitos o informales
Alimentado por óleo en llamas
En una manera sutil
El medio-la vida de ácido húmico está medida en siglos
Una declaración que límites o restringe alguna reclamación
Tomar una oportunidad
Utilizado para cortar torció esbozos
De ideas o reclamaciones
Real pero no expresable como el cociente de dos enteros
En o a o hacia el trasero
Era el corazón del Inca imperio del 12.º a 16.os siglos
Especialmente claramente perfiló
Una expresión grosera pretendió ofender o dolido
Una lonjadecalle de aire abierto para prendas económicas o de segunda mano
Sentía una bengala de delicia
En una manera quijotesca
Un nativo o residente de Oregón
Un hongo gris frecuentemente encontrado cerca fundiendo bancos de nieve
Alegó una vulneración de sus derechos bajo la Quinta Enmienda
Seis intérpretes o cantantes quiénes actúan juntos
Teniendo los límites o las fronteras establecieron
Filósofo y paleontólogo franceses (1881-1955)
Una estopa de esquí que ofrece sólo una cuerda emotiva para aguantar a
Narrando a o causado por estructura, especialmente estructura política o económica
Un saco para aguantar los víveres del cliente
Teniendo la forma convexa de un casco
El estado de deber algo (especialmente dinero)
La ley de informar vuestra presencia (como en un aeropuerto o un hotel)
Causado por compresión en un nervio que suministra el brazo
Absuelve de pago
Aspecto de pájaros y mamíferos más tempranos
Acaecería emocional encima nada en absoluto
El estado de ser genuino
Dando un aspecto falso de franqueza
Ser el resultado de
Una vez pensado para ser semillas y para hacer el poseedor invisible
La afección de ser incapaz o poco dispuesto de hablar
Un vehículo blindado con el chasis de un tanque (pero ninguna torreta) y una pistola grande
Paseo en un coche sin gol particular y sólo para el placer de él
Rock de ácido favorecido y música de rock progresivo
Un nativo o habitante de Bermudas
El juego final de un encabezamiento doble
Unidad monetaria en Argentina
La predicción para nieve era bien en el botón
Una congelación encima contratando
Un efecto utilizó para producir escenas que no puede ser conseguido por técnicas normales (especialmente encima película)
El patrimonio del mundo de conocimiento
Los bolsos de letras y envases que está transportado por el servicio postal
Construye diques complejos y logias submarinas
Muele junto, de dientes
No podemos legislar cómo las personas pasan su tiempo libre
Seguro vendrá
En secreto importando prohibió los bienes o los bienes en qué deber es previstos
Fuego una bala
Pantalla y fase británicas el actor notado para tocar funciones clásicas (1902-1983)
La forma que granula tejido
En los años medios
Resistente al ser dobló
De un atenuar sombra de blanco
Coge para saber o acaecer consciente de, normalmente accidentalmente
Uno separa en seis partes iguales
Cogía un bueno fijar en el objetivo
El deber de probar un cargo discutido
Una pausa o entreacto en la ocurrencia de algo
Aumento la tensión encima
Una ley Congreso pasado de largo en 1978 para establecer procedimientos para pedir autorización judicial para vigilancia de inteligencia extranjera y para crear la Corte de Vigilancia de Inteligencia Extranjera
Caída a una categoría
Galleta muy rica que contiene almendras de tierra
Tacto ligeramente y brevemente
Estado social alto
Un medio para la expresión o consecución de algo
La policía tomó pasos para reducir delito
De palabras o proposiciones tan narrados que ambos no pueden ser ciertos pero ambos pueden ser falsos
De o narrando a o constituyendo desarrollo
Al punto
Piensa pensamientos buenos
Impide de acostarse por la noche
El puerto de jefe es Hiroshima
El estado de no siendo susceptible
La marca más brillante y más bonito
La idea central que está expandido en un documento o discurso
Producto un sonido como si de una trompeta
(De rocas especialmente) gastados lisos por la acción de agua
Fruta negra azulada-comiendo pájaro con un timbre-gustar llamada
Puesto en la estufa o a punto para cocinar
Una cantidad de un producto
Una seta blanca grande que desarrolla manchas marrones como envejece
Situado delante del ano
Unidades de ácidos nucleicos
Una casa construyó encima o cercano una playa
Teniendo la dureza de un diamante
Una forma distorsionada por torcer o plegando
Consolidando dos o más cosas
El aficionado es estrechamente narrado al coleccionista
En su traje de cumpleaños
Alguien quién resuelve encima tierra sin derecho o título
El liderazgo de la Iglesia católica Romana
Una casa de país pretenciosa
Un grupo de pájaros
De o narrando al poder (el efecto de destrozar) de un explosivo
Un sistema de evaluación basó encima otorgando puntos según reglas
Poder de mar turco estuvo destruido en 1571 por una liga de naciones cristianas organizó por el Papa
Nuestros padres representaron a nosotros la necesidad para más precaución
Habiendo Todo aquello está necesitado
La película era fantástica!
Un dispensador que turnos un líquido (como perfume) a una neblina fina
Las historias de Disney entretienen adultos así como niños
Último innecesariamente mucho tiempo
Asomando efectos de mucha bebida fuerte
Ahora el escaño de la Iglesia ortodoxa Oriental
Un sistema entero más que un componente solo
Forma costillas verticales por tejer
Esto ayudará para impedir accidentes
Asomando carencia de favoritismo
Una glándula en qué gametos (celdas de sexo) está producido
A menudo hablamos empresariales
Caballo de un atenuar color gris pardusco
Excluido de uso o mencionar
Una colección heterogénea de grupos unió en su oposición al gobierno de Saddam Hussein de Iraq
Característica de un hombre como señalado de una mujer
Similar al roble de alfiler
Claridad falta de significar
Trayendo arriba de los niños nunca es fáciles
Tóxico a los órganos de oír o saldo o al nervio auditivo
No organizado y mantenido como empresa legal
Un reformista quién cree en resistencia pasiva
El personal era inadecuado
Árbol de caoba de Indias Del oeste
Une lengua y surco, en carpintería
El pasaje lee como sigue
En una manera legal
Una enunciación que expresa dolor o desaprobación
Un verbo de equiparar (como `ser' o `acaecer') que enlaces el tema con el complementar de una frase
(De un automóvil) teniendo el motor modificó para dar poder extra
Los pliegues de cama en un periquete
La rama de teología que está concernido con tales cosas finales como muerte y Último Juicio
Un significativo otro a quien te no es narrado por matrimonio
El mes de cosecha
Tiene hojas opuestas y un ovario compuesto inferior
Alguien quién dibuja arriba de las especificaciones que dan detalles (en cuanto a obtener una patente)
(Poético) ocurriendo en el oscuro o noche
Un anestésico general
Resistente a tajante o masticando
Había demasiado juego en el volante
El centro de habla del motor en el hemisferio izquierdo del cerebro en más personas
El capital Guyanés
El oficio de componer tipo e imprimiendo de él
Limpiamos fuera todos los cajones
La fruta preservada por cocinar con azúcar
De o narrando a o implicando vesículas
El árbol indio del este cultivado para su fruta comestible inmensa y semillas
Alimentario que caries rápidamente si no refrigerado
En una manera ilógica
Canciller de Alemania Del oeste (1876-1967)
Una escala musical con menos que siete notas
Pizca un líquido a o en contra
Una entrada pretendida para el uso de criados o para entrega de bienes y traslado de residuos
El centro de la Tierra
(Mitología romana) dios del mar
La responsabilidad de un abogado para obrar en los intereses mejores del cliente
Arquitecto italiano quién inició en el uso de hormigón reforzado (1891-1979)
Alguien quién hace las donaciones benéficas pretendieron aumentar humanas quesonbien
Compuestos sensibles y altamente inestables
Olvidé mi paraguas en el restaurante
Cualquiera de los arbustos ornamentales numerosos crecidos para sus flores vistosas de varios colores
Mercader inglés quién tomó sobre una tienda en Londres aquello estuvo expandido por su hijo a una tienda de departamento prestigiosa (1800-1885)
Espacial las entrevistas de modo que tienes algún tiempo entre los candidatos diferentes
Una ciudad en Argentina central
La empresa de inversión agresiva estirada en sus cuernos
Sexualmente entusiasmando o gratificando
Están intentando determinar la causa del accidente
Independencia conseguida del Reino Unido en 1963
Cualquier vitamina que es soluble en grasas
Tomó el chiste bien
Corte y extender abierto, como en preparación para cocinar
Las filtraciones de techo mal
Las partes más frías de aguas templadas
Un plato de vegetal
Continúa en existencia después de que (una adversidad, etc.)
De o narrando a o determinado por sociología
Un estado de oscuridad parcial o total
Aristócrata inglés quién era la primera mujer de Prince Charles
Añade vitaminas como suplemento
Aquellos cualificado de votar
Una sección o porción de un viaje o curso
Una reacción química reversible
se arrastra arriba -- utilizó especialmente de plantas
Puede ser obtenido de carne y huevos y leche y legumbres
El chico mimado del conjunto literario
Quien no malgasta no pasa necesidades
Sus dedos eran mucho tiempo y delgados
Todo aquel inclinando y rayendo no le impresionó
Constando de una línea melódica sola
Caja para recoger limosna, especialmente uno en una iglesia
Parar el proceso
El viento que mueve 32-38 nudos
La transmutación de metales de base a oro probaron para ser imposibles
Una reacción a una crisis o revés o frustración
La infección de su entusiasmo para poesía
Teniendo aversión o miedo anormales del extraños o extranjeros
Obvio al ojo o mente
Una composición musical en varios movimientos
Un azul a gris verde mineral constando de fosfato de aluminio cobrizo
Un gobierno legítimo
Conducción u obligatoriedad
Sierra maternidad como mujer sagrado llamando
El plano hizo tres rotaciones antes de que chocó
No asistencia médica dada o tratamiento
Una pieza de proyectar que suele impulso o apoyo o girar algo
Disminución rápidamente y desaparecer
La creación de cosas bellas o significativas
La ley de suministrador algo
Una puerta río abajo de una cerradura o canal que suele control el flujo de agua en el fin más bajo
Había competición entusiasta para el nombramiento
Solucionado el problema perfectamente
Pintor holandés (1450-1516)
En ángulos derechos al plano del horizonte o una línea de base
Un diamante valioso
La fiesta en un pleito quién obtiene un juicio en su favor propio
La ley de contactar algo con vuestra mano
A desbordamiento como un geiser
Mark con uno es firma
(De drogas) a través de la boca más que a través de inyección
Las cosechas fuertes y madera dura duradera
Un nombre adicional o un epíteto anexaron a un nombre (como en `Ferdinand el Sumo')
La junta más baja de la pata de una ave
El juego es original; no una adaptación
Los residuos de tiempos podrían probar fatales
Suministro con capital, como de un negocio por utilizar una combinación de capital utilizado por inversores y capital de deuda proporcionados por prestamistas
Haciendo moderno en aspecto o comportamiento
No someter a revisión o cambio
La ley de tomar de una persona a la fuerza
En una manera deforma
Cáncer del forro uterino
El estudio filosófico de ser y sabiendo
Un punto de conectar en qué muchos tacha venidos juntos
Temperatura del ente
Ciudad capital y más grande de Lucia Santa
La edad difiere en estados diferentes de la Unión
Teniendo ninguna portada de proteger o recinto
El automovilístico parado en el vado
Vestido por cubrir o atando
Estuvieron asombrados por el alboroto furioso habían causado
Ocurre más a menudo tracto digestivo o útero o vejiga o próstata
Una utilidad pública que proporciona gasista
